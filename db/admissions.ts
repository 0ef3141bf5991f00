import { and, eq, sql } from 'drizzle-orm';
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
  await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`admission:${accountId}`}))`);
  const [mine] = await tx.select().from(admissions).where(eq(admissions.predictionId, predictionId));
  const [{ held }] = await tx
    .select({ held: sql<number>`count(*)::int` })
    .from(admissions)
    .where(eq(admissions.accountId, accountId));
  if (mine) return { admitted: true, held };
  if (held >= cap) return { admitted: false, held };
  await tx.insert(admissions).values({ predictionId, accountId });
  return { admitted: true, held: held + 1 };
}

/** Releases the slot inside the caller's transaction (the engine's last write of a prediction). */
export async function releaseIn(tx: Tx, predictionId: string): Promise<void> {
  await tx.delete(admissions).where(eq(admissions.predictionId, predictionId));
}

export async function release(db: Db, predictionId: string): Promise<void> {
  await db.delete(admissions).where(eq(admissions.predictionId, predictionId));
}

export async function heldAdmissions(db: Db, accountId: string): Promise<number> {
  const [row] = await db.select({ n: sql<number>`count(*)::int` }).from(admissions).where(eq(admissions.accountId, accountId));
  return row.n;
}

/** Predictions of the account that have not started running yet. */
export async function queuedPredictions(db: Db, accountId: string): Promise<number> {
  const [row] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(predictions)
    .where(and(eq(predictions.accountId, accountId), eq(predictions.status, 'starting')));
  return row.n;
}
