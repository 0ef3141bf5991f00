/** Prompt and response text rules of the llama.cpp engine: context limits and clean UTF-8. */
import type { TextGenerationInput } from '../../domain/tasks/text-generation';
import { EngineError } from '../engine-error';

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
): { max_tokens: number; min_tokens: number } {
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

/**
 * Generated text without U+FFFD: node-llama-cpp holds back a character split across tokens until
 * it is whole, so what still decodes to U+FFFD is bytes that never make a character (a lone byte
 * token of a model, a token cut off by max_tokens mid-character). They are dropped rather than
 * shown as replacement characters in the stream and the output, and so is NUL.
 */
export function cleanText(text: string): string {
  // U+0000 too (a 0x00 byte token): Postgres cannot hold it, and the projection would show it as U+FFFD.
  return text.replace(/[\uFFFD\u0000]/g, '');
}
