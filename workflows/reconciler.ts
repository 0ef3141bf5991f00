/**
 * Finishes what closed workflows left open. A prediction or batch workflow that is terminated,
 * times out, or fails or is canceled before its last step never makes its final writes: its row
 * stays `starting`/`processing`, its stream open, its account's admission slot taken. Every few
 * seconds this singleton asks the reconcile activity to look at the open rows and held slots and
 * finish those whose workflow has closed, from that workflow's history.
 *
 * A loop workflow, like the replica scaler: one per namespace, started by the control worker,
 * surviving restarts, on a steady clock. The look is a regular activity (not a local one): it may
 * take longer than a workflow task should wait, and it queries other workflows.
 */
import { continueAsNew, log, proxyActivities, sleep } from '@temporalio/workflow';
import type { createReconcilerActivities } from '../activities/reconciler';

type ReconcilerActivities = ReturnType<typeof createReconcilerActivities>;

const { reconcileClosedWorkflows } = proxyActivities<ReconcilerActivities>({
  startToCloseTimeout: '2 minutes',
  // A failed look is simply the next tick's to take.
  retry: { maximumAttempts: 1 },
});

/** Ticks per run: the history stays short, then the loop goes on as a new run. */
const TICKS_PER_RUN = 200;

export async function reconcilerWorkflow({ intervalMs }: { intervalMs: number }): Promise<void> {
  for (let tick = 0; tick < TICKS_PER_RUN; tick++) {
    const done = await reconcileClosedWorkflows().catch((err: Error) => {
      log.warn('reconciling failed', { error: err.message });
      return undefined;
    });
    if (done && done.predictions + done.batches + done.slots > 0) log.info('reconciled closed workflows', done);
    await sleep(intervalMs);
  }
  await continueAsNew<typeof reconcilerWorkflow>({ intervalMs });
}
