/**
 * `queue` events on a prediction's SSE stream: while it waits to start behind others, its place in
 * the fair queue (the `queue` of GET /v1/predictions/{id}) each time the position or the estimate
 * changes; none while nothing is ahead of it.
 * They carry no id: they are a view of the moment, not part of the stream a client resumes.
 */
import { eq } from 'drizzle-orm';
import type { Account } from '../db/accounts';
import { predictions } from '../db/schema';
import { queuePosition, type QueueDeps, type QueueView } from './queue-position';

/** How often a waiting prediction's place is read again for its open streams. */
const QUEUE_EVENT_INTERVAL_MS = 1_000;

/** Calls `send` with the place while the prediction is `starting`; returns what stops it. */
export function watchQueuePlace(deps: QueueDeps, account: Account, predictionId: string, send: (place: QueueView) => void): () => void {
  let stopped = false;
  let last = '';
  let timer: NodeJS.Timeout | undefined;
  const look = async () => {
    const [row] = await deps.db
      .select({ status: predictions.status, versionId: predictions.versionId, createdAt: predictions.createdAt })
      .from(predictions)
      .where(eq(predictions.id, predictionId));
    if (stopped || !row || row.status !== 'starting') return false;
    const place = await queuePosition(deps, account, row.versionId, { id: predictionId, createdAt: row.createdAt });
    const key = `${place.position} ${place.eta_seconds}`;
    // Nothing ahead at the first look: a prediction about to start, no queue worth a word.
    if (last === '' && place.position <= 1) return true;
    if (!stopped && key !== last) {
      last = key;
      send(place);
    }
    return true;
  };
  const loop = () => {
    look().then(
      (waiting) => {
        if (waiting && !stopped) timer = setTimeout(loop, QUEUE_EVENT_INTERVAL_MS);
      },
      // A failed read (Postgres restarting) only skips a look.
      () => {
        if (!stopped) timer = setTimeout(loop, QUEUE_EVENT_INTERVAL_MS);
      },
    );
  };
  loop();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
