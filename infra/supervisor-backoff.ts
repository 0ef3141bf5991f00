/** When infra/supervisor.ts starts a crashed program again: exponential backoff, reset by a stable run. */

/** A run at least this long counts as a success: the next crash restarts after the first delay again. */
export const STABLE_MS = 30_000;
export const FIRST_DELAY_MS = 500;
export const MAX_DELAY_MS = 30_000;

/** After a crash that ended a run of `ranMs`: the crashes in a row it makes, and the wait before the next start. */
export function backoffAfterCrash(ranMs: number, failuresBefore: number): { failures: number; delayMs: number } {
  const failures = ranMs >= STABLE_MS ? 1 : failuresBefore + 1;
  return { failures, delayMs: Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** (failures - 1)) };
}
