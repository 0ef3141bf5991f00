/** When infra/supervisor.ts starts a crashed program again: exponential backoff, reset by a stable run. */

/** A run at least this long counts as a success: the next crash restarts at once again. */
export const STABLE_MS = 30_000;
export const FIRST_DELAY_MS = 500;
export const MAX_DELAY_MS = 30_000;

/**
 * After a crash that ended a run of `ranMs`: the crashes in a row it makes, and the wait before the
 * next start. The first crash after a stable run restarts at once: an engine's lost predictions wait
 * on its restart to report them and take them back. Crashes that follow soon back off.
 */
export function backoffAfterCrash(ranMs: number, failuresBefore: number): { failures: number; delayMs: number } {
  const failures = ranMs >= STABLE_MS ? 1 : failuresBefore + 1;
  return { failures, delayMs: failures === 1 ? 0 : Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** (failures - 2)) };
}
