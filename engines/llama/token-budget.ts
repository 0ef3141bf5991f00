/**
 * How many tokens a generation may produce: max_tokens and min_tokens against the context and the
 * prompt's length, and the tokens drawn counted against that budget.
 */
import type { Token } from 'node-llama-cpp';
import type { TextGenerationInput } from '../../domain/tasks/text-generation';
import { EngineError } from '../engine-error';

export interface TokenLimits {
  max_tokens: number;
  min_tokens: number;
}

/**
 * The generation limits a prompt of `inputTokens` leaves in a context of `contextSize`, or a
 * non-retryable ContextLengthExceeded naming the input field when the prompt does not fit: no
 * node has a larger context for the same version, and cutting the prompt would answer something
 * else than what was asked. At least one token must be left to generate.
 */
export function contextLimits(
  input: Pick<TextGenerationInput, 'prompt' | 'messages' | 'max_tokens' | 'min_tokens'>,
  inputTokens: number,
  contextSize: number,
): TokenLimits {
  const room = contextSize - inputTokens;
  if (room < 1) {
    const field = input.messages ? 'input.messages' : 'input.prompt';
    throw new EngineError(
      'ContextLengthExceeded',
      `${field}: the ${input.messages ? 'messages are' : 'prompt is'} ${inputTokens} tokens, more than the model's context of ${contextSize} tokens leaves room for (at least one token must be generated)`,
    );
  }
  const max = Math.min(input.max_tokens, room);
  return { max_tokens: max, min_tokens: Math.min(input.min_tokens, max) };
}

/** Tokens still to generate once the continued text (which counts towards max_tokens) is in. */
export function tokensLeft(limits: TokenLimits, continuedTokens: number): number {
  return limits.max_tokens - continuedTokens;
}

/**
 * How many of the tokens just drawn count, with `outputTokens` counted before them, and where some
 * lie past max_tokens the ones kept: node-llama-cpp holds a token that ends mid-character and
 * skips its maxTokens check for it, so it can draw one token past max_tokens.
 */
export function withinMaxTokens(tokens: Token[], outputTokens: number, maxTokens: number): { counted: number; kept?: Token[] } {
  const room = maxTokens - outputTokens;
  const counted = Math.min(tokens.length, room);
  return tokens.length > room ? { counted, kept: tokens.slice(0, Math.max(0, room)) } : { counted };
}

/**
 * LlamaCompletion's context shift size for a prompt of `promptTokens`. It keeps that much of the
 * context free by cutting the prompt's beginning off (a tenth of the context by default): where
 * a prompt contextLimits let through leaves less room, the shift is that room, so the prompt is
 * evaluated whole (max_tokens is clamped to the room).
 */
export function contextShiftSize(contextSize: number, promptTokens: number): number {
  return Math.max(1, Math.min(Math.floor(contextSize / 10), contextSize - promptTokens));
}
