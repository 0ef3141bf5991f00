/**
 * Batches: the projection rows, and where a batch keeps its data in object storage. The inputs
 * are one JSONL object with an index of where each chunk starts, so a chunk reads only its own
 * bytes; each chunk writes its results to a part object of its own, so a retried chunk replaces
 * its part instead of adding lines; the output is assembled from the parts once, at the end.
 */
import { and, desc, eq, inArray, lte } from 'drizzle-orm';
import type { BatchSnapshot } from '../domain/batch-contracts';
import type { BatchStatus } from '../domain/statuses';
import type { Db } from './client';
import { afterCursor, type PageCursor, pageOf } from './paging';
import type { RunWriter } from './predictions';
import { withoutNul } from './sanitize';
import { batches, files } from './schema';

export type BatchRow = typeof batches.$inferSelect;

export const batchInputKey = (id: string): string => `batches/${id}/input.jsonl`;
/** Little-endian uint64 byte offsets: where chunk i starts, and (last) the input's length. */
export const batchIndexKey = (id: string): string => `batches/${id}/index.bin`;
export const batchPartKey = (id: string, chunk: number): string => `batches/${id}/parts/${String(chunk).padStart(8, '0')}.jsonl`;

const toDate = (s: string | null) => (s ? new Date(s) : null);

/**
 * Writes the snapshot unless a newer one is there already (a late retry never wins). The same
 * revision again replaces it: a workflow task re-run after its local activities ran, whose values
 * are the ones history keeps (as for predictions, db/predictions.ts).
 */
export async function writeBatchSnapshot(db: Db, snapshot: BatchSnapshot, writer?: RunWriter): Promise<boolean> {
  const s = withoutNul(snapshot);
  return db.transaction(async (tx) => {
    const [before] = await tx.select({ runId: batches.runId }).from(batches).where(eq(batches.id, s.id)).for('update');
    // Another run wrote last (a continue-as-new, or an operator's reset): the current run wins
    // whatever its revision, and an older run's late write loses (as for predictions).
    const otherRun = Boolean(writer && before?.runId && before.runId !== writer.runId);
    if (otherRun && !(await writer!.isCurrent())) return false;
    const values = {
      ...s,
      createdAt: new Date(s.createdAt),
      startedAt: toDate(s.startedAt),
      completedAt: toDate(s.completedAt),
      runId: writer?.runId ?? before?.runId ?? null,
    };
    const { id: _id, accountId: _a, createdAt: _c, ...changes } = values;
    const written = await tx
      .insert(batches)
      .values(values)
      .onConflictDoUpdate({ target: batches.id, set: changes, setWhere: otherRun ? undefined : lte(batches.revision, s.revision) })
      .returning({ id: batches.id });
    return written.length > 0;
  });
}

export async function getBatch(db: Db, accountId: string, id: string): Promise<BatchRow | undefined> {
  return db.query.batches.findFirst({ where: and(eq(batches.id, id), eq(batches.accountId, accountId)) });
}

/** A batch whose run has ended may be retried from these: a succeeded one only when some items failed. */
export const retryableBatchStatuses: readonly BatchStatus[] = ['failed', 'canceled', 'succeeded'];

/**
 * Puts an ended batch back to `starting` for a retry's run, as the next attempt; undefined when
 * it is not ended (any more), e.g. another retry reopened it first. As for a prediction
 * (db/predictions.ts reopenForRetry) the row is a first row again (revision 0, no run), so the
 * new run's writes win; counts and output stay until the new run writes its own.
 */
export async function reopenBatchForRetry(db: Db, before: BatchRow): Promise<BatchRow | undefined> {
  const [row] = await db
    .update(batches)
    .set({ status: 'starting', error: null, startedAt: null, completedAt: null, revision: 0, runId: null, attempt: before.attempt + 1 })
    .where(and(eq(batches.id, before.id), inArray(batches.status, [...retryableBatchStatuses]), eq(batches.attempt, before.attempt)))
    .returning();
  return row;
}

/** Undoes a retry whose run never started: the row as it was. */
export async function restoreBatchAfterFailedRetry(db: Db, before: BatchRow): Promise<void> {
  const { id: _id, accountId: _a, createdAt: _c, ...columns } = before;
  await db.update(batches).set(columns).where(eq(batches.id, before.id));
}

/** Newest first, cursor-paged like predictions. */
export async function listBatches(
  db: Db,
  accountId: string,
  opts: { limit: number; cursor?: PageCursor },
): Promise<{ rows: BatchRow[]; next?: PageCursor }> {
  const rows = await db
    .select()
    .from(batches)
    .where(and(eq(batches.accountId, accountId), afterCursor(batches.createdAt, batches.id, opts.cursor)))
    .orderBy(desc(batches.createdAt), desc(batches.id))
    .limit(opts.limit + 1);
  return pageOf(rows, opts.limit);
}

/** The output's row in `files`: written again as it is when an assembly is retried. */
export async function upsertOutputFile(db: Db, row: typeof files.$inferInsert): Promise<void> {
  await db
    .insert(files)
    .values(row)
    .onConflictDoUpdate({ target: files.id, set: { size: row.size, sha256: row.sha256 } });
}
