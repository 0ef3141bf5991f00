/**
 * The floor of the benchmarks: the least a prediction can cost on Temporal. One workflow runs
 * one activity on a second task queue (as a prediction runs `predict` on `model:<version>`) and
 * returns its result. Nothing else: no projection, no search attributes, no signals. Beside it,
 * `visibleWorkflow` adds the visibility work of a prediction, one piece at a time.
 */
import { patched, proxyActivities, upsertSearchAttributes } from '@temporalio/workflow';
import { KilnStatus } from '../../domain/search-attributes';
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

/** What Kiln's prediction adds to Temporal's visibility, one piece at a time (`npm run bench -- visibility`). */
export interface VisibleArgs extends BareArgs {
  /** A `patched()` call: the SDK records its marker and upserts `TemporalChangeVersion` with it. */
  patch: boolean;
  /** `KilnStatus` upserted once at the end, as a prediction sets its final status. */
  finalStatus: boolean;
}

/** The bare workflow with the visibility work a prediction does; search attributes at start are the client's. */
export async function visibleWorkflow({ activityQueue, text, patch, finalStatus }: VisibleArgs): Promise<string> {
  const { echo } = proxyActivities<typeof floorActivities>({
    taskQueue: activityQueue,
    scheduleToStartTimeout: '1 minute',
    startToCloseTimeout: '1 minute',
    retry: { maximumAttempts: 1 },
  });
  const marked = patch && patched('bench-visibility');
  const result = await echo(marked ? `${text}.` : text);
  if (finalStatus) upsertSearchAttributes([{ key: KilnStatus, value: 'succeeded' }]);
  return result;
}
