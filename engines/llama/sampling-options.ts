/** The options node-llama-cpp generates a request's tokens with: its sampling, budget, bias and streaming hooks. */
import type { LlamaGrammar, Token, TokenBias } from 'node-llama-cpp';
import type { TextGenerationInput } from '../../domain/tasks/text-generation';

export interface GenerationHooks {
  maxTokens: number;
  seed: number;
  grammar?: LlamaGrammar;
  signal: AbortSignal;
  tokenBias: () => TokenBias;
  onToken: (tokens: Token[]) => void;
  onTextChunk: (text: string) => void;
}

export type SamplingOptions = ReturnType<typeof samplingOptions>;

export function samplingOptions(input: Pick<TextGenerationInput, 'temperature' | 'top_p' | 'top_k'>, run: GenerationHooks) {
  return {
    maxTokens: run.maxTokens,
    temperature: input.temperature,
    topP: input.top_p,
    topK: input.top_k,
    seed: run.seed,
    // No penalty the input does not ask for: temperature 0 then means the most likely token, and
    // a penalty over the tokens so far would judge a drafted token (checked in a batch before the
    // tokens ahead of it are counted) otherwise than the same token decoded alone.
    repeatPenalty: false as const,
    // min_tokens: the end-of-text tokens are banned until enough has been generated.
    tokenBias: run.tokenBias,
    grammar: run.grammar,
    signal: run.signal,
    stopOnAbortSignal: true,
    onToken: run.onToken,
    onTextChunk: run.onTextChunk,
  };
}
