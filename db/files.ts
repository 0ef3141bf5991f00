import { and, desc, eq, inArray } from 'drizzle-orm';
import { fileKey } from '../lib/file-keys';
import { idFromKey } from '../lib/ids';
import type { Db } from './client';
import { files } from './schema';

export type FileRow = typeof files.$inferSelect;

/** The id of the file a prediction's attempt outputs: known in advance, so a failed attempt's file can be found and removed. */
export const outputFileId = (predictionId: string, attempt: number): string =>
  idFromKey(`prediction ${predictionId}`, `output of attempt ${attempt}`);

/**
 * Removes the output files of a prediction's attempts 1..`attempts` that its final output does
 * not refer to: the files of attempts that failed after storing theirs (or that no one reads).
 * Returns the ids removed. The ids are computed, not read, so a retry after a partial removal
 * finds the rest.
 */
export async function removeOrphanOutputFiles(
  db: Db,
  storage: { delete(key: string): Promise<void> },
  predictionId: string,
  attempts: number,
  output: unknown,
): Promise<string[]> {
  const kept = JSON.stringify(output ?? null);
  const ids = Array.from({ length: attempts }, (_, i) => outputFileId(predictionId, i + 1)).filter((id) => !kept.includes(id));
  if (ids.length === 0) return [];
  await db.delete(files).where(inArray(files.id, ids));
  await Promise.all(ids.map((id) => storage.delete(fileKey(id))));
  return ids;
}

export async function insertFile(db: Db, row: typeof files.$inferInsert): Promise<FileRow> {
  const [created] = await db.insert(files).values(row).returning();
  return created;
}

/** Records an output file without reading it back: the engine's database role may add files, not read them. */
export async function recordOutputFile(db: Db, row: typeof files.$inferInsert): Promise<void> {
  await db.insert(files).values(row);
}

export async function getFile(db: Db, id: string): Promise<FileRow | undefined> {
  return db.query.files.findFirst({ where: eq(files.id, id) });
}

export async function listFiles(db: Db, accountId: string): Promise<FileRow[]> {
  return db.select().from(files).where(eq(files.accountId, accountId)).orderBy(desc(files.createdAt)).limit(100);
}

export async function deleteFile(db: Db, accountId: string, id: string): Promise<FileRow | undefined> {
  const [row] = await db
    .delete(files)
    .where(and(eq(files.id, id), eq(files.accountId, accountId)))
    .returning();
  return row;
}
