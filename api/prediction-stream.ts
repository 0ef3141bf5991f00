/**
 * Follows one prediction's stream: replays the events after a given one, then every new one as
 * the hub says it arrived, until `done`. Late joiners get everything produced so far; a
 * reconnect with Last-Event-ID resumes with no gap and no duplicate. The replay leaves out the
 * output of engine attempts that failed (the output before the last `reset`): the reset still
 * goes out, for a client that had some of that output before it reconnected. A reader that numbers
 * the events itself (the Responses API) asks for that output too, marked void, so that its
 * numbering is the same live and replayed. An `attempt` event
 * (a new attempt continues the output so far) changes nothing for a reader and is not passed on.
 *
 * Clients see and resume from each event's `seq`, its number in the prediction's stream; the
 * follower reads by the serial id, which orders the table.
 */
import { eq } from 'drizzle-orm';
import type { Db } from '../db/client';
import { eventIdAtSeq, eventsAfter, lastResetAfter, type PredictionEventRow } from '../db/events';
import { predictions } from '../db/schema';
import { isTerminalStatus } from '../domain/statuses';
import { SharedReads } from '../lib/shared-reads';
import type { EventHub } from './event-hub';
import { doneWithoutEvent, passedOn } from './followed-events';

/**
 * The hub wakes a stream for each batch of new events and after a lost LISTEN; this look without
 * a notification is a last guard, slow enough that open streams cost the database nothing to speak of.
 */
const SAFETY_RECHECK_MS = 30_000;
const PAGE = 1000;

/**
 * Reads in flight by prediction, position and the hub's notice mark. The streams of one
 * prediction that have caught up wait at the same event, and a notification wakes them all at
 * once; streams that open together (a client's many tabs, or many clients on one prediction) ask
 * the same first questions: each such set of streams shares one read of each. The mark keeps a
 * stream woken by a later notification out of a read that began before it.
 */
const reads = new SharedReads();

type Reads = { db: Db; hub: EventHub };
const keyOf = (deps: Reads, what: string, predictionId: string, afterId: number) =>
  `${what} ${predictionId} ${afterId} ${deps.hub.noticeMark(predictionId)}`;

const sharedEventsAfter = (deps: Reads, predictionId: string, afterId: number) =>
  reads.share(keyOf(deps, 'events', predictionId, afterId), () => eventsAfter(deps.db, predictionId, afterId, PAGE));

const sharedLastResetAfter = (deps: Reads, predictionId: string, afterId: number) =>
  reads.share(keyOf(deps, 'reset', predictionId, afterId), () => lastResetAfter(deps.db, predictionId, afterId));

/** Whether the prediction ended with no event after `afterId`: its status, and no event left to read. */
const sharedEndedWithoutEvents = ({ db, hub }: Reads, predictionId: string, afterId: number) =>
  reads.share(keyOf({ db, hub }, 'ended', predictionId, afterId), async () => {
    const [row] = await db.select({ status: predictions.status }).from(predictions).where(eq(predictions.id, predictionId));
    if (!row || !isTerminalStatus(row.status)) return undefined;
    return (await eventsAfter(db, predictionId, afterId, 1)).length === 0 ? row.status : undefined;
  });

export function followPrediction(
  deps: { db: Db; hub: EventHub },
  predictionId: string,
  afterSeq: number,
  onEvent: (e: PredictionEventRow, voided: boolean) => void,
  onEnd: () => void,
  opts: { withVoided?: boolean } = {},
): () => void {
  /** The serial id of the last event read (undefined until the resume point is found). */
  let last: number | undefined;
  let lastSeq = afterSeq;
  /** Output events below this id belong to a failed attempt: not replayed. */
  let replayFrom: number | undefined;
  let closed = false;
  let running = false;
  let again = false;
  /**
   * Whether the next pump also asks if the prediction ended without a `done` event: the first
   * pump, a resync and the safety look do; a notification means an event came, so it need not
   * (two queries less for every batch of tokens).
   */
  let checkEnd = true;

  const finish = () => {
    if (closed) return;
    closed = true;
    unsubscribe();
    clearInterval(safety);
    onEnd();
  };

  const pump = async (lookAtEnd = false) => {
    if (lookAtEnd) checkEnd = true;
    if (closed) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        last ??= afterSeq > 0 ? await eventIdAtSeq(deps.db, predictionId, afterSeq) : 0;
        replayFrom ??= await sharedLastResetAfter(deps, predictionId, last);
        for (;;) {
          const rows = await sharedEventsAfter(deps, predictionId, last);
          for (const row of rows) {
            if (closed) return;
            last = row.id;
            lastSeq = row.seq;
            const passed = passedOn(row, replayFrom, opts.withVoided === true);
            if (!passed) continue;
            onEvent(row, passed.voided);
            if (row.event === 'done') return finish();
          }
          if (rows.length < PAGE) break;
        }
      } while (again && !closed);
      if (!checkEnd) return;
      checkEnd = false;
      // A prediction that ended without a done event (made before streams existed) still ends.
      const ended = await sharedEndedWithoutEvents(deps, predictionId, last);
      if (ended) {
        onEvent(doneWithoutEvent(predictionId, { id: last, seq: lastSeq }, ended), false);
        finish();
      }
    } catch {
      // The next notification or look tries again.
    } finally {
      running = false;
    }
  };

  const unsubscribe = deps.hub.subscribe(predictionId, (_outputOnly, resync) => void pump(resync));
  const safety = setInterval(() => void pump(true), SAFETY_RECHECK_MS);
  void pump(true);
  return finish;
}
