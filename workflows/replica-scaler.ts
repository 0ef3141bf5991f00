/**
 * Adds replicas: every few seconds, asks placement which versions need another node (a backlog
 * on their queue, or fewer than min_instances) and loads them there; the new node then polls
 * `model:<versionId>` beside the others and takes its share. Idle replicas still scale to zero
 * on their own nodes (idle TTL), so this only ever adds.
 *
 * Why a loop workflow and not a step of each prediction: a prediction that waits in the queue
 * would otherwise pay for a load it may not need, and a burst of them would all decide at once.
 * One singleton, started by the control worker, decides alone, on a steady clock, and survives
 * control worker restarts like any workflow.
 */
import { condition, continueAsNew, log, patched, proxyActivities, proxyLocalActivities, sleep } from '@temporalio/workflow';
import type { createControlActivities } from '../activities/control';
import type { ReplicaLoad } from '../domain/contracts';
import { LOOK_LOOP_ACTIVITY, looksPerActivity } from './look-loop-activity';
import { engineOnNode } from './placement';

type ControlActivities = ReturnType<typeof createControlActivities>;

const { planReplicas } = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '10 seconds',
  // A failed look is simply the next tick's to take.
  retry: { maximumAttempts: 1 },
});

const { watchReplicas } = proxyActivities<ControlActivities>(LOOK_LOOP_ACTIVITY);

/** Ticks per run: the history stays short, then the loop goes on as a new run. */
const TICKS_PER_RUN = 200;

/**
 * While no load is under way, the looks run in one long activity until one plans a load (or its
 * looks are done: workflows/look-loop-activity.ts), instead of a local activity and a timer each: on an idle stack
 * those cost about 7 % of a core in Temporal and the control worker. While loads are under way,
 * each tick plans with what is loading now, as before.
 */
export const SCALE_IN_ONE_ACTIVITY_PATCH = 'scale-in-one-activity';

export async function replicaScalerWorkflow({ intervalMs }: { intervalMs: number }): Promise<void> {
  const loading = new Map<string, ReplicaLoad>();
  for (let tick = 0; tick < TICKS_PER_RUN; tick++) {
    const watch = loading.size === 0 && patched(SCALE_IN_ONE_ACTIVITY_PATCH);
    const planned = watch
      ? watchReplicas({ intervalMs, looks: looksPerActivity(intervalMs) })
      : planReplicas({ loading: [...loading.values()] });
    const plan = await planned.catch((err: Error) => {
      log.warn('replica planning failed', { error: err.message });
      return [];
    });
    for (const load of plan) {
      loading.set(load.versionId, load);
      // Not again on the same node: the next tick plans afresh with what is live then.
      const { loadModel } = engineOnNode(load.nodeId, { maximumAttempts: 1 });
      void loadModel({ versionId: load.versionId })
        .catch((err: Error) => log.warn('replica load failed', { ...load, error: err.message }))
        .finally(() => loading.delete(load.versionId));
    }
    // A watch slept between its looks already.
    if (!watch) await sleep(intervalMs);
  }
  await condition(() => loading.size === 0);
  await continueAsNew<typeof replicaScalerWorkflow>({ intervalMs });
}
