import { and, eq, type Placeholder, sql } from 'drizzle-orm';
import type { Db } from './client';
import type { Tx } from './events';
import { admissions, predictions } from './schema';

/**
 * Takes one of the account's admission slots for the prediction, if one is free. Idempotent: a
 * retried admission of the same prediction keeps its slot. The account's advisory lock makes the
 * count and the insert one step across all workers.
 */
export async function admit(db: Db, predictionId: string, accountId: string, cap: number): Promise<{ admitted: boolean; held: number }> {
  return db.transaction((tx) => admitIn(tx, predictionId, accountId, cap));
}

/** `admit` inside a transaction of the caller's (the API's create writes the first row in the same one). */
export async function admitIn(tx: Tx, predictionId: string, accountId: string, cap: number): Promise<{ admitted: boolean; held: number }> {
  await lockAdmissions(tx, accountId);
  return takeSlot(tx, predictionId, accountId, cap);
}

/** The account's admission lock, held to the transaction's end: counts and inserts of slots are one step under it. */
export async function lockAdmissions(tx: Tx, accountId: string): Promise<void> {
  await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`admission:${accountId}`}))`);
}

/**
 * Under the account's lock (taken by an earlier statement, so this one's snapshot sees every slot
 * taken before it): the prediction's own slot, the account's count, and the insert when there is
 * room, in one round trip.
 */
export async function takeSlot(tx: Tx, predictionId: string, accountId: string, cap: number): Promise<{ admitted: boolean; held: number }> {
  const [row] = await tx.execute<{ mine: boolean; held: number; taken: boolean }>(sql`
    with mine as (select 1 from ${admissions} where ${admissions.predictionId} = ${predictionId}),
    held as (select count(*)::int as n from ${admissions} where ${admissions.accountId} = ${accountId}),
    taken as (
      insert into ${admissions} (prediction_id, account_id)
      select ${predictionId}, ${accountId} where not exists (select 1 from mine) and (select n from held) < ${cap}
      returning 1
    )
    select exists (select 1 from mine) as mine, (select n from held) as held, exists (select 1 from taken) as taken`);
  if (row.mine) return { admitted: true, held: row.held };
  return row.taken ? { admitted: true, held: row.held + 1 } : { admitted: false, held: row.held };
}

/** Gives the prediction's slot back (in the caller's transaction, where one is given). */
export async function release(db: Db | Tx, predictionId: string): Promise<void> {
  await db.delete(admissions).where(eq(admissions.predictionId, predictionId));
}

export async function heldAdmissions(db: Db, accountId: string): Promise<number> {
  const [row] = await db.select({ n: sql<number>`count(*)::int` }).from(admissions).where(eq(admissions.accountId, accountId));
  return row.n;
}

/** The account's predictions that have not started running yet (a create counts them in db/rate-limits.ts's statement). */
export const queuedOf = (accountId: string | Placeholder) => and(eq(predictions.accountId, accountId), eq(predictions.status, 'starting'));

export async function queuedPredictions(db: Db, accountId: string): Promise<number> {
  const [row] = await db.select({ n: sql<number>`count(*)::int` }).from(predictions).where(queuedOf(accountId));
  return row.n;
}
