/**
 * A prepared generation decoded on a lent sequence by node-llama-cpp: a chat through LlamaChat
 * (which renders the chat template), a completion through LlamaCompletion, topped up to min_tokens.
 */
import type { LlamaContextSequence } from 'node-llama-cpp';
import { chatToAnswer, type GenerationPrompt } from './generation-prompt';
import { topUpToMinTokens } from './min-tokens';
import type { SamplingOptions } from './sampling-options';
import { contextShiftSize, type TokenLimits } from './token-budget';

type NodeLlamaCpp = typeof import('node-llama-cpp');

export interface Decoding {
  nlc: Pick<NodeLlamaCpp, 'LlamaChat' | 'LlamaCompletion'>;
  sequence: LlamaContextSequence;
  contextSize: number;
  prompt: GenerationPrompt;
  continues: string;
  continuedTokens: number;
  limits: TokenLimits;
  options: SamplingOptions;
  /** The output so far: a completion topped up to min_tokens goes on from its text. */
  stream: { readonly outputTokens: number; readonly text: string };
  signal: AbortSignal;
  /** Takes the chat's or completion's disposal, to run once the generation's result is read. */
  onDispose: (dispose: () => void) => void;
}

/** Decodes the generation; its stop reason. */
export function decode(d: Decoding): Promise<string> {
  return d.prompt.kind === 'chat' ? decodeChat(d, d.prompt) : decodeCompletion(d, d.prompt);
}

async function decodeChat(d: Decoding, prompt: Extract<GenerationPrompt, { kind: 'chat' }>): Promise<string> {
  const chat = new d.nlc.LlamaChat({ contextSequence: d.sequence, chatWrapper: prompt.wrapper });
  d.onDispose(() => chat.dispose({ disposeSequence: false }));
  const { metadata } = await chat.generateResponse(chatToAnswer(prompt, d.continues), d.options);
  return metadata.stopReason;
}

async function decodeCompletion(d: Decoding, prompt: Extract<GenerationPrompt, { kind: 'completion' }>): Promise<string> {
  const completion = new d.nlc.LlamaCompletion({ contextSequence: d.sequence });
  d.onDispose(() => completion.dispose({ disposeSequence: false }));
  const complete = async (text: string, promptTokens: number, overrides = {}) => {
    const options = { ...d.options, contextShiftSize: contextShiftSize(d.contextSize, promptTokens), ...overrides };
    return (await completion.generateCompletionWithMeta(text, options)).metadata.stopReason;
  };
  const inputTokens = prompt.tokens.length;
  const stopReason = await complete(prompt.text + d.continues, inputTokens + d.continuedTokens);
  return topUpToMinTokens(stopReason, d.stream, d.limits, d.continuedTokens, d.signal, (overrides) =>
    complete(prompt.text + d.stream.text, inputTokens + d.stream.outputTokens, overrides),
  );
}
