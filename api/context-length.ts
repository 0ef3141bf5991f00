/**
 * A prediction that failed because its prompt, or a text to embed, does not fit the model's
 * context (the engine's non-retryable ContextLengthExceeded: engines/llama/token-budget.ts, and
 * LlamaEngine.embed) is the caller's input at fault: the APIs answer it as such (422 on
 * Replicate's, 400 context_length_exceeded on OpenAI's) instead of as a failed prediction.
 */
import type { PredictionRow } from '../db/predictions';
import { ValidationError } from './errors';

export interface ContextLengthFailure {
  /** `input.prompt`, `input.messages` or `input.text`. */
  field: string;
  description: string;
}

// The workflow's error is "Attempt N failed on node X: <type>: <message>", the message naming the field.
const PATTERN = /ContextLengthExceeded: (input\.(?:prompt|messages|text)): (.*)$/s;

export function contextLengthFailure(row: Pick<PredictionRow, 'status' | 'error'>): ContextLengthFailure | undefined {
  if (row.status !== 'failed' || !row.error) return undefined;
  const m = PATTERN.exec(row.error);
  return m ? { field: m[1], description: m[2] } : undefined;
}

/** Replicate's API: a 422 naming the input field, when a synchronous wait ended in that failure. */
export function throwIfContextLengthExceeded(row: Pick<PredictionRow, 'status' | 'error'>): void {
  const failure = contextLengthFailure(row);
  if (failure) throw new ValidationError([failure]);
}
