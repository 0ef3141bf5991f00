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
