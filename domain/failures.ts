import { ApplicationFailure } from '@temporalio/common';

/** Failures that another attempt cannot fix: the input, the model or the account is the problem. */
const NON_RETRYABLE = [
  'AccountDisabled',
  'ModelVersionNotFound',
  'InvalidInput',
  'ModelTooLarge',
  'ModelFileCorrupt',
  'ModelLoadFailed',
  /** A version's draft model (speculative decoding) has another vocabulary than the version's. */
  'DraftTokenizerMismatch',
  'OverCapacity',
  /** The prompt is longer than the model's context: no node of the version can take it. */
  'ContextLengthExceeded',
  /** The model ran and refused this input (e.g. the echo fixture's `error`). */
  'ModelError',
  /** A batch chunk used up its attempts (or failed for good): the batch stops there. */
  'BatchChunkFailed',
] as const;

/** Faults of the moment: a node went away, was full, or a step broke; another attempt may succeed. */
const RETRYABLE = [
  /** The engine stopped before it finished: node shutdown, lost heartbeat, crash. */
  'EngineInterrupted',
  /** The node had no room next to the busy models it holds. */
  'NodeBusy',
  /** Anything else that broke during an attempt. */
  'EngineFault',
] as const;

export type NonRetryableFailureType = (typeof NON_RETRYABLE)[number];
export type RetryableFailureType = (typeof RETRYABLE)[number];

/**
 * Every failure Kiln raises on purpose, typed by whether retrying can help. Errors of no Kiln
 * type (a dropped connection, say) count as retryable faults.
 */
export type KilnFailureType = NonRetryableFailureType | RetryableFailureType;

export const NON_RETRYABLE_TYPES: KilnFailureType[] = [...NON_RETRYABLE];
export const RETRYABLE_TYPES: KilnFailureType[] = [...RETRYABLE];

export function isNonRetryableType(type: string | undefined | null): boolean {
  return (NON_RETRYABLE_TYPES as Array<string | undefined | null>).includes(type);
}

/**
 * `details` travel with the failure to the workflow (a batch chunk's progress, for instance);
 * `cause` is the error it wraps, kept in the failure's chain.
 */
export function kilnFailure(type: KilnFailureType, message: string, details?: unknown[], cause?: Error): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: isNonRetryableType(type), details, cause });
}
