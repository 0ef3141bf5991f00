/**
 * The floor of the benchmarks: the least a prediction can cost on Temporal. One workflow runs
 * one activity on a second task queue (as a prediction runs `predict` on `model:<version>`) and
 * returns its result. Nothing else: no projection, no search attributes, no signals.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { floorActivities } from './activities';

export interface BareArgs {
  activityQueue: string;
  text: string;
}

export async function bareWorkflow({ activityQueue, text }: BareArgs): Promise<string> {
  const { echo } = proxyActivities<typeof floorActivities>({
    taskQueue: activityQueue,
    scheduleToStartTimeout: '1 minute',
    startToCloseTimeout: '1 minute',
    retry: { maximumAttempts: 1 },
  });
  return echo(text);
}
