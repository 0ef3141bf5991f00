/**
 * The activity options of a loop workflow's long activity (activities/look-loop.ts): the
 * reconciler's `reconcileEvery` and the replica scaler's `watchReplicas`.
 */
import type { ActivityOptions } from '@temporalio/workflow';

export const LOOK_LOOP_ACTIVITY: ActivityOptions = {
  // Its looks, the sleeps between them and a slow look's two minutes, with room to spare.
  startToCloseTimeout: '2 hours',
  // Four missed beats (activities/look-loop.ts, LOOK_HEARTBEAT_MS): a lost worker's loop starts
  // again on another within 20 s.
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '10 seconds' },
};

/** One such activity looks for about this long: a run's history holds a few of them, not a timer per look. */
const LOOK_ACTIVITY_SPAN_MS = 10 * 60_000;

/** The looks of one activity at `intervalMs` apart (at least one). */
export function looksPerActivity(intervalMs: number): number {
  return Math.max(1, Math.round(LOOK_ACTIVITY_SPAN_MS / intervalMs));
}
