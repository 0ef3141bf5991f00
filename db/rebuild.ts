/**
 * Writes projection rows read back from Temporal history (cli/rebuild-projections.ts). Upserts
 * only, by revision: a row whose history Temporal no longer has (past retention, or never
 * there) is never touched, and a row that knows more than the history read (the reconciler's
 * finish of a terminated run is one revision past the run's own state) keeps what it knows.
 * Stream events are left alone: they are not part of the row, and rewriting them would repeat them.
 */
import { eq } from 'drizzle-orm';
import type { BatchSnapshot } from '../domain/batch-contracts';
import { type PredictionSnapshot } from '../domain/prediction-snapshot';
import type { Db } from './client';
import { type RunWriter, snapshotToRow } from './predictions';
import { withoutNul } from './sanitize';
import { batches, predictions } from './schema';

export type RebuildOutcome = 'written' | 'kept';

/**
 * Whether history's state replaces the row: yes when there is no row, when the row was written by
 * an older run of the workflow (a reset), or when the row's revision is not past history's.
 */
async function historyWins(
  before: { revision: number; runId: string | null } | undefined,
  revision: number,
  writer: RunWriter,
): Promise<boolean> {
  if (!before) return true;
  if (before.runId && before.runId !== writer.runId) return writer.isCurrent();
  return before.revision <= revision;
}

export async function upsertPredictionFromHistory(db: Db, snapshot: PredictionSnapshot, writer: RunWriter): Promise<RebuildOutcome> {
  const s = withoutNul(snapshot);
  return db.transaction(async (tx) => {
    const [before] = await tx
      .select({ revision: predictions.revision, runId: predictions.runId, source: predictions.source })
      .from(predictions)
      .where(eq(predictions.id, s.id))
      .for('update');
    if (!(await historyWins(before, s.revision, writer))) return 'kept';
    // `source` is the API's to say (history does not carry it): an existing row keeps its own.
    const values = { ...snapshotToRow(s), runId: writer.runId, source: before?.source ?? 'api' };
    const { id: _id, accountId: _a, createdAt: _c, ...changes } = values;
    await tx.insert(predictions).values(values).onConflictDoUpdate({ target: predictions.id, set: changes });
    return 'written';
  });
}

export async function upsertBatchFromHistory(db: Db, snapshot: BatchSnapshot, writer: RunWriter): Promise<RebuildOutcome> {
  const s = withoutNul(snapshot);
  return db.transaction(async (tx) => {
    const [before] = await tx
      .select({ revision: batches.revision, runId: batches.runId })
      .from(batches)
      .where(eq(batches.id, s.id))
      .for('update');
    if (!(await historyWins(before, s.revision, writer))) return 'kept';
    const toDate = (v: string | null) => (v ? new Date(v) : null);
    const values = {
      ...s,
      createdAt: new Date(s.createdAt),
      startedAt: toDate(s.startedAt),
      completedAt: toDate(s.completedAt),
      runId: writer.runId,
    };
    const { id: _id, accountId: _a, createdAt: _c, ...changes } = values;
    await tx.insert(batches).values(values).onConflictDoUpdate({ target: batches.id, set: changes });
    return 'written';
  });
}
