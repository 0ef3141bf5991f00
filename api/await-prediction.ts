import type { Client } from '@temporalio/client';
import type { Db } from '../db/client';
import { getPrediction, type PredictionRow } from '../db/predictions';
import { predictionWorkflowId } from '../workflows/types';
import { isTerminalStatus } from '../db/schema';

/**
 * The prediction once its workflow has finished (its final projection is written before the
 * workflow returns), or as it stands when `timeoutMs` runs out or the client goes away.
 */
export async function awaitPrediction(
  deps: { db: Db; temporal: Client },
  row: PredictionRow,
  opts: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<PredictionRow> {
  if (isTerminalStatus(row.status)) return row;
  const handle = deps.temporal.workflow.getHandle(predictionWorkflowId(row.id));
  const waits: Array<Promise<unknown>> = [handle.result().catch(() => undefined)];
  let timer: NodeJS.Timeout | undefined;
  if (opts.timeoutMs !== undefined) waits.push(new Promise((resolve) => (timer = setTimeout(resolve, opts.timeoutMs))));
  if (opts.signal) waits.push(new Promise((resolve) => opts.signal!.addEventListener('abort', resolve, { once: true })));
  try {
    await Promise.race(waits);
  } finally {
    clearTimeout(timer);
  }
  return (await getPrediction(deps.db, row.accountId, row.id)) ?? row;
}
