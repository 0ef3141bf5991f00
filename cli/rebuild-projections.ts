/**
 * Event-sourced projections: every prediction's state lives in its workflow. A finished
 * workflow's result is its final state; a running one answers the `prediction` query. Reading
 * them all and writing them back rebuilds the predictions table from Temporal alone.
 */
import type { Client } from '@temporalio/client';
import type { Db } from '../db/client';
import type { PredictionSnapshot } from '../db/predictions';
import { replacePredictions } from '../db/rebuild';

export async function collectPredictionStates(temporal: Client, onProgress?: (n: number) => void): Promise<PredictionSnapshot[]> {
  const states: PredictionSnapshot[] = [];
  const reading = new Set<Promise<void>>();
  for await (const execution of temporal.workflow.list({ query: 'WorkflowType = "predictionWorkflow"' })) {
    const handle = temporal.workflow.getHandle(execution.workflowId, execution.runId);
    const read = (async () => {
      const state =
        execution.status.name === 'RUNNING'
          ? await handle.query<PredictionSnapshot>('prediction')
          : await handle.result().catch(() => undefined);
      if (state) states.push(state as PredictionSnapshot);
      onProgress?.(states.length);
    })();
    reading.add(read);
    void read.finally(() => reading.delete(read));
    // A few histories at a time: fast, without flooding the frontend.
    if (reading.size >= 16) await Promise.race(reading);
  }
  await Promise.all(reading);
  return states;
}

export async function rebuildProjections(db: Db, temporal: Client, onProgress?: (n: number) => void): Promise<number> {
  return replacePredictions(db, await collectPredictionStates(temporal, onProgress));
}
