/**
 * What the reconciler (workflows/reconciler.ts) looks at: projection rows that are not finished
 * and admission slots still held, past a minimum age, a cursor page at a time (all of them, every
 * look: each page is one question to Temporal's visibility).
 */
import { and, desc, eq, inArray, lt } from 'drizzle-orm';
import { type PredictionStatus } from '../domain/statuses';
import type { Db } from './client';
import { afterCursor, type PageCursor, pageOf } from './paging';
import type { PredictionRow } from './predictions';
import { admissions, batches, modelVersions, predictions } from './schema';

const OPEN_PREDICTION: PredictionStatus[] = ['starting', 'processing'];

type Page<R> = { rows: R[]; next?: PageCursor };

/** Predictions not in a terminal status, older than `olderThan`: newest first, in cursor pages. */
export async function openPredictions(db: Db, olderThan: Date, limit: number, cursor?: PageCursor): Promise<Page<PredictionRow>> {
  const rows = await db
    .select()
    .from(predictions)
    .where(
      and(
        inArray(predictions.status, OPEN_PREDICTION),
        lt(predictions.createdAt, olderThan),
        afterCursor(predictions.createdAt, predictions.id, cursor),
      ),
    )
    .orderBy(desc(predictions.createdAt), desc(predictions.id))
    .limit(limit + 1);
  return pageOf(rows, limit);
}

/** The rows of these predictions, whatever their status (ids with no row are left out). */
export async function predictionRows(db: Db, ids: string[]): Promise<PredictionRow[]> {
  if (ids.length === 0) return [];
  return db.select().from(predictions).where(inArray(predictions.id, ids));
}

export async function openBatches(db: Db, olderThan: Date, limit: number, cursor?: PageCursor): Promise<Page<typeof batches.$inferSelect>> {
  const rows = await db
    .select()
    .from(batches)
    .where(
      and(
        inArray(batches.status, ['starting', 'processing']),
        lt(batches.createdAt, olderThan),
        afterCursor(batches.createdAt, batches.id, cursor),
      ),
    )
    .orderBy(desc(batches.createdAt), desc(batches.id))
    .limit(limit + 1);
  return pageOf(rows, limit);
}

/** Held slots: `id` is a prediction's id, or `batch-<id>` for a batch; `createdAt` is when it was taken. */
export async function heldSlots(
  db: Db,
  olderThan: Date,
  limit: number,
  cursor?: PageCursor,
): Promise<Page<{ id: string; createdAt: Date }>> {
  const rows = await db
    .select({ id: admissions.predictionId, createdAt: admissions.admittedAt })
    .from(admissions)
    .where(and(lt(admissions.admittedAt, olderThan), afterCursor(admissions.admittedAt, admissions.predictionId, cursor)))
    .orderBy(desc(admissions.admittedAt), desc(admissions.predictionId))
    .limit(limit + 1);
  return pageOf(rows, limit);
}

export async function versionTask(db: Db, versionId: string): Promise<string> {
  const [row] = await db.select({ task: modelVersions.task }).from(modelVersions).where(eq(modelVersions.id, versionId));
  return row?.task ?? 'unknown';
}
