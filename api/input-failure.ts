/**
 * A prediction that failed because of its input is the caller's input at fault, and the APIs
 * answer it as such (422 on Replicate's, 400 on OpenAI's) instead of as a failed prediction: a
 * prompt, or a text to embed, that does not fit the model's context (the engine's non-retryable
 * ContextLengthExceeded: engines/llama/token-budget.ts, and LlamaEngine.embed), and an input the
 * engine refuses naming its field (InvalidInput, such as a schema llama.cpp cannot build a
 * grammar from: engines/llama/grammar.ts).
 */
import type { PredictionRow } from '../db/predictions';
import { ValidationError } from './errors';

export interface InputFailure {
  type: 'ContextLengthExceeded' | 'InvalidInput';
  /** `input.prompt`, `input.messages`, `input.text`, `input.json_schema`… */
  field: string;
  description: string;
}

// The workflow's error is "Attempt N failed on node X: <type>: <message>", the message naming the field.
const PATTERN = /(ContextLengthExceeded|InvalidInput): (input\.[\w$.]*\w): (.*)$/s;

export function inputFailure(row: Pick<PredictionRow, 'status' | 'error'>): InputFailure | undefined {
  if (row.status !== 'failed' || !row.error) return undefined;
  const m = PATTERN.exec(row.error);
  return m ? { type: m[1] as InputFailure['type'], field: m[2], description: m[3] } : undefined;
}

/** Replicate's API: a 422 naming the input field, when a synchronous wait ended in such a failure. */
export function throwIfInputFailed(row: Pick<PredictionRow, 'status' | 'error'>): void {
  const failure = inputFailure(row);
  if (failure) throw new ValidationError([{ field: failure.field, description: failure.description }]);
}
