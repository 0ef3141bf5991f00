/** The rows of OpenAI Responses API responses (db/schema.ts `responses`), always read within one account. */
import { and, eq } from 'drizzle-orm';
import type { Db } from './client';
import { predictions, responses } from './schema';

export type ResponseRow = typeof responses.$inferSelect;
export type PredictionOfResponse = typeof predictions.$inferSelect;

/** Writes the row once: a create retried with its Idempotency-Key joins the prediction, and its row, already there. */
export async function insertResponse(db: Db, row: typeof responses.$inferInsert): Promise<void> {
  await db.insert(responses).values(row).onConflictDoNothing({ target: responses.id });
}

/** The account's response with its prediction; another account's id reads as none, like a missing one. */
export async function getResponse(
  db: Db,
  accountId: string,
  id: string,
): Promise<{ response: ResponseRow; prediction: PredictionOfResponse } | undefined> {
  const [row] = await db
    .select({ response: responses, prediction: predictions })
    .from(responses)
    .innerJoin(predictions, eq(predictions.id, responses.predictionId))
    .where(and(eq(responses.id, id), eq(responses.accountId, accountId)));
  return row;
}

/** Whether it was there (and is gone now). The prediction stays: it is the account's usage record. */
export async function deleteResponse(db: Db, accountId: string, id: string): Promise<boolean> {
  const gone = await db
    .delete(responses)
    .where(and(eq(responses.id, id), eq(responses.accountId, accountId)))
    .returning({ id: responses.id });
  return gone.length > 0;
}
