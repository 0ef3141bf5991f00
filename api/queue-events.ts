/**
 * `queue` events on a prediction's SSE stream: while it waits to start behind others, its place in
 * the fair queue (the `queue` of GET /v1/predictions/{id}) each time the position or the estimate
 * changes; none while nothing is ahead of it.
 * They carry no id: they are a view of the moment, not part of the stream a client resumes.
 *
 * The streams of one prediction share one watcher: one look a second however many are open, and a
 * stream that opens later gets the place the others were last told.
 */
import { eq } from 'drizzle-orm';
import type { Account } from '../db/accounts';
import { predictions } from '../db/schema';
import { type QueueDeps, type QueueView, queuePosition } from './queue-position';

/** How often a waiting prediction's place is read again for its open streams. */
const QUEUE_EVENT_INTERVAL_MS = 1_000;

type Send = (place: QueueView) => void;

interface Watcher {
  streams: Set<Send>;
  /** The place last sent, as JSON of position and estimate ('' before the first). */
  last: string;
  lastPlace?: QueueView;
  timer?: NodeJS.Timeout;
  stopped: boolean;
}

const watchers = new Map<string, Watcher>();

/** Calls `send` with the place while the prediction is `starting`; returns what stops it. */
export function watchQueuePlace(deps: QueueDeps, account: Account, predictionId: string, send: Send): () => void {
  let watcher = watchers.get(predictionId);
  if (!watcher) {
    watcher = { streams: new Set(), last: '', stopped: false };
    watchers.set(predictionId, watcher);
    loop(deps, account, predictionId, watcher);
  } else if (watcher.lastPlace) {
    send(watcher.lastPlace);
  }
  watcher.streams.add(send);
  const w = watcher;
  return () => {
    w.streams.delete(send);
    if (w.streams.size > 0) return;
    w.stopped = true;
    clearTimeout(w.timer);
    if (watchers.get(predictionId) === w) watchers.delete(predictionId);
  };
}

function loop(deps: QueueDeps, account: Account, predictionId: string, w: Watcher): void {
  const again = () => {
    if (!w.stopped) w.timer = setTimeout(() => loop(deps, account, predictionId, w), QUEUE_EVENT_INTERVAL_MS);
  };
  look(deps, account, predictionId, w).then(
    (waiting) => {
      if (waiting) again();
      // Started (or gone): the place no longer changes; a stream opened now needs no watcher.
      else if (watchers.get(predictionId) === w) watchers.delete(predictionId);
    },
    // A failed read (Postgres restarting) only skips a look.
    again,
  );
}

async function look(deps: QueueDeps, account: Account, predictionId: string, w: Watcher): Promise<boolean> {
  const [row] = await deps.db
    .select({ status: predictions.status, versionId: predictions.versionId, createdAt: predictions.createdAt })
    .from(predictions)
    .where(eq(predictions.id, predictionId));
  if (w.stopped || !row || row.status !== 'starting') return false;
  const place = await queuePosition(deps, account, row.versionId, { id: predictionId, createdAt: row.createdAt });
  const key = `${place.position} ${place.eta_seconds}`;
  // Nothing ahead at the first look: a prediction about to start, no queue worth a word.
  if (w.last === '' && place.position <= 1) return true;
  if (!w.stopped && key !== w.last) {
    w.last = key;
    w.lastPlace = place;
    for (const send of w.streams) send(place);
  }
  return true;
}
