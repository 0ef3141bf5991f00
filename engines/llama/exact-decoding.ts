/**
 * A completion or plain chat decoded so that a later attempt can continue it exactly: token by token on the
 * sequence (no re-tokenized text), in chunks of CHUNK_TOKENS generated tokens whose sampler is
 * seeded from the request's seed and the chunk's index. Between two chunks the sequence is idle,
 * holding the prompt and every generated token but the last drawn one, which is when a KV
 * checkpoint can be saved. An attempt that continues restores the latest checkpoint (or prefills
 * the prompt again) and decodes on from that chunk's start: the KV state and the sampler are
 * those of the failed attempt there, so it draws the very tokens that attempt drew. The ones
 * already streamed are drawn again but not streamed twice.
 */
import { createHash } from 'node:crypto';
import type { LlamaContextSequence, LlamaModel, Token, TokenBias } from 'node-llama-cpp';
import type { TextGenerationInput } from '../../domain/tasks/text-generation';
import { evaluatePromptButLast } from './prompt-evaluation';

/** Generated tokens per chunk: a boundary (where a checkpoint may be taken) every this many. */
export const CHUNK_TOKENS = 64;

/** A 32-bit seed for chunk `chunk`: chunk 0 uses the request's own, so a short generation samples as it always did. */
export function chunkSeed(seed: number, chunk: number): number {
  if (chunk === 0) return seed;
  let h = (seed ^ Math.imul(chunk, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * Whether a request draws the same tokens on every attempt: greedy, or seeded. A sampled request
 * with no seed gets a new seed each attempt, so nothing it drew can be drawn again.
 */
export function isRepeatable(request: Pick<TextGenerationInput, 'temperature' | 'seed'>): boolean {
  return request.temperature === 0 || request.seed !== undefined;
}

/**
 * Whether a generation is decoded token by token in seeded chunks, so that an attempt that
 * continues it draws the same tokens: a repeatable completion, or a chat whose endings exact
 * decoding keeps (./chat-endings.ts), with no grammar and no draft model, and a continuation only where the
 * continued text's token count is known.
 */
export function decodesExactly(job: {
  /** A completion, or a chat that needs nothing of LlamaChat but its endings. */
  plainPrompt: boolean;
  grammar: boolean;
  speculative: boolean;
  request: Pick<TextGenerationInput, 'temperature' | 'seed'>;
  continues: string;
  continuedTokensKnown: boolean;
}): boolean {
  return job.plainPrompt && !job.grammar && !job.speculative && isRepeatable(job.request) && (!job.continues || job.continuedTokensKnown);
}

/**
 * Where a restored checkpoint lets decoding start: the generated tokens it holds after the prompt
 * and its pending token, or undefined where what it holds does not begin with this prompt.
 */
export function checkpointStart(checkpoint: { held: Token[]; pending: Token[] }, promptTokens: Token[]): Token[] | undefined {
  if (checkpoint.held.length < promptTokens.length || !promptTokens.every((t, i) => checkpoint.held[i] === t)) return undefined;
  return [...checkpoint.held.slice(promptTokens.length), ...checkpoint.pending];
}

/**
 * How long after a checkpoint's save ends the next one is due: once the save's whole time is at
 * most `share` of the time since it began.
 */
export const checkpointDueAfterMs = (saveMs: number, share: number): number => (saveMs * (1 - share)) / share;

/**
 * What names one generation on every attempt and every node: its checkpoints are kept under it.
 * Two requests with the same key draw the same tokens, so either's checkpoints serve the other.
 */
export function generationKey(versionId: string, owner: string | undefined, request: TextGenerationInput, seed: number): string {
  const drawn = request.temperature === 0 ? null : seed;
  return createHash('sha256')
    .update(JSON.stringify([versionId, owner ?? '', request, drawn]))
    .digest('hex');
}

/** Where decoding starts: the generated tokens the sequence holds (all but the last), from a checkpoint or none. */
export interface ExactStart {
  /** Generated tokens before the first one to draw: every one but the last is evaluated in the sequence already. */
  generated: Token[];
}

export interface ExactDecoding {
  model: LlamaModel;
  sequence: LlamaContextSequence;
  /** The prompt as evaluated (its beginning token included). */
  promptTokens: Token[];
  start: ExactStart;
  /** Generated tokens at most (the continued ones included). */
  maxTokens: number;
  sampling: { temperature?: number; topK?: number; topP?: number; seed: number };
  tokenBias: () => TokenBias;
  signal: AbortSignal;
  /** Each token drawn, with its index among the generated ones and the text it adds (with the tokens before it as context). */
  onToken: (token: Token, index: number, generated: readonly Token[]) => void;
  /** At a chunk's end, the sequence idle: the generated tokens so far (the last not yet evaluated). */
  atBoundary: (generated: readonly Token[]) => Promise<void>;
}

/** Decodes until max tokens, an end token or the signal; its stop reason and the generated tokens. */
export async function decodeExactly(d: ExactDecoding): Promise<{ stopReason: string; generated: Token[] }> {
  const { sequence, model } = d;
  const generated = [...d.start.generated];
  let input: Token[];
  if (generated.length === 0) {
    // The prompt, first or again after a failed attempt left no usable checkpoint: its last token alone, as ever.
    await evaluatePromptButLast(sequence, d.promptTokens, d.signal);
    input = d.promptTokens.slice(-1);
  } else {
    input = [generated.at(-1)!];
  }
  while (generated.length < d.maxTokens) {
    if (d.signal.aborted) return { stopReason: 'abort', generated };
    const chunk = Math.floor(generated.length / CHUNK_TOKENS);
    const until = Math.min((chunk + 1) * CHUNK_TOKENS, d.maxTokens);
    const iterator = sequence.evaluate(input, {
      ...d.sampling,
      seed: chunkSeed(d.sampling.seed, chunk),
      tokenBias: d.tokenBias,
      yieldEogToken: true,
    });
    let ended: string | undefined;
    for await (const token of iterator) {
      if (model.isEogToken(token)) {
        ended = 'eogToken';
        break;
      }
      generated.push(token);
      d.onToken(token, generated.length - 1, generated);
      if (d.signal.aborted) {
        ended = 'abort';
        break;
      }
      if (generated.length >= until) break;
    }
    if (ended) return { stopReason: ended, generated };
    if (generated.length >= d.maxTokens) break;
    await d.atBoundary(generated);
    input = [generated.at(-1)!];
  }
  return { stopReason: 'maxTokens', generated };
}
