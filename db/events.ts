import { and, asc, desc, eq, gt, inArray, sql } from 'drizzle-orm';
import type { Db } from './client';
import { withoutNul } from './sanitize';
import { predictionEvents, type StreamEvent } from './schema';

export const EVENTS_CHANNEL = 'kiln_prediction_events';

export type PredictionEventRow = typeof predictionEvents.$inferSelect;
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

/**
 * Appends events and notifies listeners at commit. Writers of one prediction take its advisory
 * lock, so event ids grow in commit order and a reader resuming after id N never skips one.
 * Returns the id of the last event written.
 */
export async function appendEvents(
  db: Db | Tx,
  predictionId: string,
  events: Array<{ event: StreamEvent; data: string }>,
): Promise<number | undefined> {
  if (events.length === 0) return undefined;
  const write = async (tx: Db | Tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${predictionId}))`);
    const rows = await tx
      .insert(predictionEvents)
      .values(events.map((e) => ({ predictionId, event: e.event, data: withoutNul(e.data) })))
      .returning({ id: predictionEvents.id });
    await tx.execute(sql`select pg_notify(${EVENTS_CHANNEL}, ${predictionId})`);
    return Math.max(...rows.map((r) => r.id));
  };
  return 'rollback' in db ? write(db) : db.transaction(write);
}

/**
 * The first output chunk of an engine attempt. Output already in the stream was written by an
 * attempt that failed: a `reset` goes first, so a client drops that text and keeps one generation.
 */
export async function appendFirstOutput(db: Db, predictionId: string, data: string): Promise<number | undefined> {
  return db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${predictionId}))`);
    const retried = await hasEvent(tx, predictionId, 'output');
    return appendEvents(tx, predictionId, [...(retried ? [{ event: 'reset' as const, data: '{}' }] : []), { event: 'output', data }]);
  });
}

/**
 * Whether an output write whose commit went unanswered (the connection died) landed: the
 * prediction's last output was written after `afterId` (the writer's previous event) or, for an
 * attempt's first write, right after a reset or as the first output. Returns its id.
 *
 * Only ids and event names are read: the engine, which writes the stream, may not read what any
 * stream holds (its database role has no SELECT on `data`). The writer of an attempt is the only
 * one writing its prediction's output, so an output after its own last event is its own.
 */
export async function landedOutput(db: Db, predictionId: string, afterId: number | undefined): Promise<number | undefined> {
  const [last, before] = await db
    .select({ id: predictionEvents.id, event: predictionEvents.event })
    .from(predictionEvents)
    .where(and(eq(predictionEvents.predictionId, predictionId), inArray(predictionEvents.event, ['output', 'reset'])))
    .orderBy(desc(predictionEvents.id))
    .limit(2);
  if (last?.event !== 'output') return undefined;
  const ours = afterId === undefined ? before?.event !== 'output' : last.id > afterId;
  return ours ? last.id : undefined;
}

/** The id of the prediction's last `reset` after `afterId`, or 0: output before it is a failed attempt's. */
export async function lastResetAfter(db: Db, predictionId: string, afterId: number): Promise<number> {
  const [row] = await db
    .select({ id: predictionEvents.id })
    .from(predictionEvents)
    .where(and(eq(predictionEvents.predictionId, predictionId), eq(predictionEvents.event, 'reset'), gt(predictionEvents.id, afterId)))
    .orderBy(desc(predictionEvents.id))
    .limit(1);
  return row?.id ?? 0;
}

export async function eventsAfter(db: Db, predictionId: string, afterId: number, limit = 1000): Promise<PredictionEventRow[]> {
  return db
    .select()
    .from(predictionEvents)
    .where(and(eq(predictionEvents.predictionId, predictionId), gt(predictionEvents.id, afterId)))
    .orderBy(asc(predictionEvents.id))
    .limit(limit);
}

export async function hasEvent(db: Db | Tx, predictionId: string, event: StreamEvent): Promise<boolean> {
  const rows = await db
    .select({ id: predictionEvents.id })
    .from(predictionEvents)
    .where(and(eq(predictionEvents.predictionId, predictionId), eq(predictionEvents.event, event)))
    .limit(1);
  return rows.length > 0;
}
