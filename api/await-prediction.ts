import type { Client } from '@temporalio/client';
import type { Db } from '../db/client';
import { getPrediction, type PredictionRow } from '../db/predictions';
import { predictionWorkflowId } from '../workflows/types';
import { isTerminalStatus } from '../db/schema';
import type { EventHub } from './event-hub';

/** A look at the row even without a notification: one may be lost while LISTEN reconnects. */
const RECHECK_MS = 1_000;

/**
 * The prediction once it has finished, or as it stands when `timeoutMs` runs out or the client
 * goes away. With the API's event hub it waits for the final projection itself (written, with a
 * `done` event, before the workflow returns): no long poll on Temporal per waiting request, and
 * the answer leaves a workflow task earlier. Without one, it waits for the workflow's result.
 */
export async function awaitPrediction(
  deps: { db: Db; temporal: Client; hub?: EventHub },
  row: PredictionRow,
  opts: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<PredictionRow> {
  if (isTerminalStatus(row.status)) return row;
  const read = async () => (await getPrediction(deps.db, row.accountId, row.id)) ?? row;
  const cleanups: Array<() => void> = [];
  try {
    const waits: Array<Promise<PredictionRow | undefined>> = [];
    if (deps.hub) {
      const hub = deps.hub;
      waits.push(
        new Promise<PredictionRow>((resolve, reject) => {
          let reading = false;
          let again = false;
          const check = () => {
            if (reading) return void (again = true);
            reading = true;
            read().then((latest) => {
              reading = false;
              if (isTerminalStatus(latest.status)) resolve(latest);
              else if (again) {
                again = false;
                check();
              }
            }, reject);
          };
          cleanups.push(hub.subscribe(row.id, check));
          const timer = setInterval(check, RECHECK_MS);
          cleanups.push(() => clearInterval(timer));
          // It may have finished between the caller's read and the subscription.
          check();
        }),
      );
    } else {
      const handle = deps.temporal.workflow.getHandle(predictionWorkflowId(row.id));
      waits.push(handle.result().then(read, read));
    }
    if (opts.timeoutMs !== undefined) {
      waits.push(
        new Promise((resolve) => {
          const timer = setTimeout(() => resolve(undefined), opts.timeoutMs);
          cleanups.push(() => clearTimeout(timer));
        }),
      );
    }
    if (opts.signal) {
      const signal = opts.signal;
      waits.push(new Promise((resolve) => signal.addEventListener('abort', () => resolve(undefined), { once: true })));
    }
    return (await Promise.race(waits)) ?? (await read());
  } finally {
    for (const cleanup of cleanups) cleanup();
  }
}
