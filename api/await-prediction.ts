import type { Db } from '../db/client';
import { getPrediction, type PredictionRow } from '../db/predictions';
import { isTerminalStatus } from '../domain/statuses';
import type { EventHub } from './event-hub';

/**
 * A look at the row even without a notification. The hub wakes every wait after a lost LISTEN,
 * so this is a last guard, slow enough that waiting requests cost the database nothing to speak of.
 */
const RECHECK_MS = 30_000;

/**
 * The prediction once it has finished, or as it stands when `timeoutMs` runs out or the client
 * goes away. It waits for the final projection itself (written, with a `done` event, before the
 * workflow returns), told by the API's LISTEN: no long poll on Temporal per waiting request, and
 * the answer leaves a workflow task earlier.
 */
export async function awaitPrediction(
  deps: { db: Db; hub: EventHub },
  row: PredictionRow,
  opts: {
    timeoutMs?: number;
    signal?: AbortSignal;
    /** When `row` was read or written (performance.now()): unless the hub heard of new events since, the row is current. */
    readAt?: number;
  } = {},
): Promise<PredictionRow> {
  if (isTerminalStatus(row.status)) return row;
  const read = async () => (await getPrediction(deps.db, row.accountId, row.id)) ?? row;
  const cleanups: Array<() => void> = [];
  try {
    const waits: Array<Promise<PredictionRow | undefined>> = [
      new Promise<PredictionRow>((resolve, reject) => {
        const check = () =>
          void read().then((latest) => {
            if (isTerminalStatus(latest.status)) resolve(latest);
          }, reject);
        // Output chunks come every few milliseconds while a model generates; the end never comes with them alone.
        cleanups.push(deps.hub.subscribe(row.id, (outputOnly) => outputOnly || check()));
        const timer = setInterval(check, RECHECK_MS);
        cleanups.push(() => clearInterval(timer));
        // It may have finished between the caller's read and the subscription (a create's own
        // row, just written, has not unless the hub heard so: one read fewer per create).
        if (opts.readAt === undefined || deps.hub.noticedSince(row.id, opts.readAt)) check();
      }),
    ];
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
