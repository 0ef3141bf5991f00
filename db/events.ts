import { and, asc, eq, gt, sql } from 'drizzle-orm';
import type { Db } from './client';
import { withoutNul } from './sanitize';
import { predictionEvents, type StreamEvent } from './schema';

export const EVENTS_CHANNEL = 'kiln_prediction_events';

export type PredictionEventRow = typeof predictionEvents.$inferSelect;
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

/**
 * Appends events and notifies listeners at commit. Writers of one prediction take its advisory
 * lock, so event ids grow in commit order and a reader resuming after id N never skips one.
 */
export async function appendEvents(
  db: Db | Tx,
  predictionId: string,
  events: Array<{ event: StreamEvent; data: string }>,
): Promise<void> {
  if (events.length === 0) return;
  const write = async (tx: Db | Tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${predictionId}))`);
    await tx.insert(predictionEvents).values(events.map((e) => ({ predictionId, event: e.event, data: withoutNul(e.data) })));
    await tx.execute(sql`select pg_notify(${EVENTS_CHANNEL}, ${predictionId})`);
  };
  if ('rollback' in db) await write(db);
  else await db.transaction(write);
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
