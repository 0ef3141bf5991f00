/**
 * What the reconciler (workflows/reconciler.ts) looks at: projection rows that are not finished
 * and admission slots still held. Each is a question to Temporal (is its workflow closed?), so
 * only rows past a minimum age are read, oldest first, a page at a time.
 */
import { and, asc, eq, inArray, lt } from 'drizzle-orm';
import type { Db } from './client';
import { admissions, batches, modelVersions, predictions, type PredictionStatus } from './schema';
import type { PredictionRow, PredictionSnapshot } from './predictions';

const OPEN_PREDICTION: PredictionStatus[] = ['starting', 'processing'];

export async function openPredictions(db: Db, olderThan: Date, limit: number): Promise<PredictionRow[]> {
  return db
    .select()
    .from(predictions)
    .where(and(inArray(predictions.status, OPEN_PREDICTION), lt(predictions.createdAt, olderThan)))
    .orderBy(asc(predictions.createdAt))
    .limit(limit);
}

export async function openBatches(db: Db, olderThan: Date, limit: number): Promise<Array<typeof batches.$inferSelect>> {
  return db
    .select()
    .from(batches)
    .where(and(inArray(batches.status, ['starting', 'processing']), lt(batches.createdAt, olderThan)))
    .orderBy(asc(batches.createdAt))
    .limit(limit);
}

/** Held slots: `predictionId` is a prediction's id, or `batch-<id>` for a batch. */
export async function heldSlots(db: Db, olderThan: Date, limit: number): Promise<Array<{ predictionId: string; accountId: string }>> {
  return db
    .select({ predictionId: admissions.predictionId, accountId: admissions.accountId })
    .from(admissions)
    .where(lt(admissions.admittedAt, olderThan))
    .orderBy(asc(admissions.admittedAt))
    .limit(limit);
}

export async function versionTask(db: Db, versionId: string): Promise<string> {
  const [row] = await db.select({ task: modelVersions.task }).from(modelVersions).where(eq(modelVersions.id, versionId));
  return row?.task ?? 'unknown';
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** A projection row as the workflow's snapshot: what the reconciler starts from when history cannot be read. */
export function rowToSnapshot(row: PredictionRow): PredictionSnapshot {
  return {
    id: row.id,
    accountId: row.accountId,
    model: row.model,
    versionId: row.versionId,
    input: row.input,
    output: row.output,
    logs: row.logs,
    error: row.error,
    status: row.status,
    metrics: row.metrics,
    createdAt: row.createdAt.toISOString(),
    startedAt: iso(row.startedAt),
    completedAt: iso(row.completedAt),
    webhook: row.webhook,
    webhookEventsFilter: row.webhookEventsFilter,
    deadline: iso(row.deadline),
    revision: row.revision,
  };
}
