/** How failures are classed (retry or not), the waits of a retry policy, and batch checkpoints. */
import { ActivityFailure, ApplicationFailure, TimeoutFailure } from '@temporalio/common';
import { chunkProgressOf, furthest } from '../../domain/batch-contracts';
import { isNonRetryableType, kilnFailure, NON_RETRYABLE_TYPES, RETRYABLE_TYPES } from '../../domain/failures';
import { describeFailure, isRetryableFault, retryDelayMs, retryPolicyOf } from '../../workflows/placement';

const activityFailed = (cause: Error) => new ActivityFailure('activity failed', 'predict', '1', 'NON_RETRYABLE_FAILURE', 'worker', cause);

test('each Kiln failure type is retryable or not, never both', () => {
  expect(NON_RETRYABLE_TYPES.filter((t) => RETRYABLE_TYPES.includes(t))).toEqual([]);
  expect(kilnFailure('ModelError', 'no').nonRetryable).toBe(true);
  expect(kilnFailure('EngineFault', 'oops').nonRetryable).toBe(false);
  expect(isNonRetryableType('InvalidInput')).toBe(true);
  expect(isNonRetryableType('NodeBusy')).toBe(false);
  expect(kilnFailure('EngineInterrupted', 'cut', [{ chunk: 1 }]).details).toEqual([{ chunk: 1 }]);
});

test('timeouts and faults are retried; Kiln business failures are not', () => {
  expect(isRetryableFault(activityFailed(new TimeoutFailure('activity Heartbeat timeout', undefined, 'HEARTBEAT')))).toBe(true);
  expect(isRetryableFault(activityFailed(kilnFailure('EngineFault', 'x')))).toBe(true);
  expect(isRetryableFault(activityFailed(ApplicationFailure.create({ message: 'socket hang up' })))).toBe(true);
  expect(isRetryableFault(activityFailed(kilnFailure('ModelError', 'no')))).toBe(false);
  // The type decides, even if whoever threw it forgot to mark it non-retryable.
  expect(isRetryableFault(activityFailed(ApplicationFailure.create({ type: 'InvalidInput', message: 'bad', nonRetryable: false })))).toBe(
    false,
  );
  expect(isRetryableFault(new Error('not an activity'))).toBe(false);
  expect(describeFailure(activityFailed(kilnFailure('ModelError', 'echo fixture: no')))).toBe('ModelError: echo fixture: no');
  // An engine's error travels as the cause of Kiln's failure: the failure, not its cause, describes it.
  const engineError = ApplicationFailure.create({ type: 'EngineError', message: 'input.prompt: too long' });
  expect(describeFailure(activityFailed(kilnFailure('ContextLengthExceeded', 'input.prompt: too long', undefined, engineError)))).toBe(
    'ContextLengthExceeded: input.prompt: too long',
  );
  expect(describeFailure(activityFailed(ApplicationFailure.create({ message: 'outer', cause: new Error('socket hang up') })))).toBe(
    'socket hang up',
  );
});

test('a retry policy: defaults filled in, waits grow by the backoff', () => {
  const p = retryPolicyOf({ max_attempts: 5, initial_interval_s: 0.5, backoff: 3 });
  expect([1, 2, 3].map((n) => retryDelayMs(p, n))).toEqual([500, 1500, 4500]);
  expect(retryPolicyOf(undefined)).toEqual({ max_attempts: 3, initial_interval_s: 1, backoff: 2 });
});

test('a chunk checkpoint is read only for its chunk, and the further one wins', () => {
  const a = chunkProgressOf({ chunk: 2, node: 'n1', items: 5, failed: 0, lines: ['{"index":10}'] }, 2);
  expect(a).toMatchObject({ chunk: 2, node: 'n1', items_done: 1 });
  expect(chunkProgressOf({ chunk: 3, lines: [] }, 2)).toBeUndefined();
  expect(chunkProgressOf(undefined, 2)).toBeUndefined();
  const b = chunkProgressOf({ chunk: 2, items: 5, failed: 1, lines: ['{"index":10}', '{"index":11}'] }, 2);
  expect(furthest(a, b)).toBe(b);
  expect(furthest(b, a)).toBe(b);
  expect(furthest(undefined, a)).toBe(a);
});
