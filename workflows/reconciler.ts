/**
 * Finishes what closed workflows left open. A prediction or batch workflow that is terminated,
 * times out, or fails or is canceled before its last step never makes its final writes: its row
 * stays `starting`/`processing`, its stream open, its account's admission slot taken. Every few
 * seconds this singleton's activity looks at the open rows and held slots and finishes those
 * whose workflow has closed, from that workflow's history.
 *
 * A loop workflow, like the replica scaler: one per namespace, started by the control worker,
 * surviving restarts, on a steady clock. The looks run in one long activity that sleeps between
 * them (activities/reconciler.ts, reconcileEvery): a regular activity, not a local one, since a look
 * may take longer than a workflow task should wait, and it queries other workflows.
 */
import { continueAsNew, log, patched, proxyActivities, sleep } from '@temporalio/workflow';
import type { createReconcilerActivities } from '../activities/reconciler';
import { LOOK_LOOP_ACTIVITY, looksPerActivity } from './look-loop-activity';

type ReconcilerActivities = ReturnType<typeof createReconcilerActivities>;

const { reconcileClosedWorkflows } = proxyActivities<ReconcilerActivities>({
  startToCloseTimeout: '2 minutes',
  // A failed look is simply the next tick's to take.
  retry: { maximumAttempts: 1 },
});

const { reconcileEvery } = proxyActivities<ReconcilerActivities>(LOOK_LOOP_ACTIVITY);

/** Ticks per run: the history stays short, then the loop goes on as a new run. */
const TICKS_PER_RUN = 200;

/** Look activities per run: its history, a few dozen events. */
const ACTIVITIES_PER_RUN = 10;

/** The looks run in one long activity instead of an activity and a timer each. */
export const RECONCILE_IN_ONE_ACTIVITY_PATCH = 'reconcile-in-one-activity';

export async function reconcilerWorkflow({ intervalMs }: { intervalMs: number }): Promise<void> {
  if (patched(RECONCILE_IN_ONE_ACTIVITY_PATCH)) {
    const looks = looksPerActivity(intervalMs);
    for (let run = 0; run < ACTIVITIES_PER_RUN; run++) await reconcileEvery({ intervalMs, looks });
  } else {
    for (let tick = 0; tick < TICKS_PER_RUN; tick++) {
      const done = await reconcileClosedWorkflows().catch((err: Error) => {
        log.warn('reconciling failed', { error: err.message });
        return undefined;
      });
      if (done && done.predictions + done.batches + done.slots > 0) log.info('reconciled closed workflows', done);
      await sleep(intervalMs);
    }
  }
  await continueAsNew<typeof reconcilerWorkflow>({ intervalMs });
}
