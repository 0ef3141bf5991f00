/**
 * Follows one prediction's stream: replays the events after a given id, then every new one as
 * the hub says it arrived, until `done`. Late joiners get everything produced so far; a
 * reconnect with Last-Event-ID resumes with no gap and no duplicate. The replay leaves out the
 * output of engine attempts that failed (the output before the last `reset`): the reset still
 * goes out, for a client that had some of that output before it reconnected. An `attempt` event
 * (a new attempt continues the output so far) changes nothing for a reader and is not passed on.
 */
import { eq } from 'drizzle-orm';
import type { Db } from '../db/client';
import { eventsAfter, lastResetAfter, type PredictionEventRow } from '../db/events';
import { predictions } from '../db/schema';
import { isTerminalStatus } from '../domain/statuses';
import type { EventHub } from './event-hub';

/** A missed notification (a reconnect of the LISTEN connection) costs at most this long. */
const FALLBACK_POLL_MS = 1_000;

export function followPrediction(
  deps: { db: Db; hub: EventHub },
  predictionId: string,
  afterId: number,
  onEvent: (e: PredictionEventRow) => void,
  onEnd: () => void,
): () => void {
  let last = afterId;
  /** Output events below this id belong to a failed attempt: not replayed. */
  let replayFrom: number | undefined;
  let closed = false;
  let running = false;
  let again = false;
  /**
   * Whether the next pump also asks if the prediction ended without a `done` event: the first
   * pump and the fallback poll do; a notification means an event came, so it need not (two
   * queries less for every batch of tokens).
   */
  let checkEnd = true;

  const finish = () => {
    if (closed) return;
    closed = true;
    unsubscribe();
    clearInterval(poller);
    onEnd();
  };

  const pump = async (poll = false) => {
    if (poll) checkEnd = true;
    if (closed) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        replayFrom ??= await lastResetAfter(deps.db, predictionId, afterId);
        for (;;) {
          const rows = await eventsAfter(deps.db, predictionId, last);
          for (const row of rows) {
            if (closed) return;
            last = row.id;
            if ((row.event === 'output' && row.id < replayFrom) || row.event === 'attempt') continue;
            onEvent(row);
            if (row.event === 'done') return finish();
          }
          if (rows.length < 1000) break;
        }
      } while (again && !closed);
      if (!checkEnd) return;
      checkEnd = false;
      // A prediction that ended without a done event (made before streams existed) still ends.
      const [row] = await deps.db.select({ status: predictions.status }).from(predictions).where(eq(predictions.id, predictionId));
      if (row && isTerminalStatus(row.status) && (await eventsAfter(deps.db, predictionId, last, 1)).length === 0) {
        const data = row.status === 'succeeded' ? '{}' : JSON.stringify({ reason: row.status });
        onEvent({ id: last + 1, predictionId, event: 'done', data, attempt: 1, tokens: null, createdAt: new Date() });
        finish();
      }
    } catch {
      // The next notification or poll tries again.
    } finally {
      running = false;
    }
  };

  const unsubscribe = deps.hub.subscribe(predictionId, () => void pump());
  const poller = setInterval(() => void pump(true), FALLBACK_POLL_MS);
  void pump(true);
  return finish;
}
