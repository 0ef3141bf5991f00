import { and, desc, eq } from 'drizzle-orm';
import type { Db } from './client';
import { files } from './schema';

export type FileRow = typeof files.$inferSelect;

export const fileKey = (id: string): string => `files/${id}`;

/**
 * How outputs refer to files inside Kiln: `kiln-file:<id>.<signature>`. The API turns a reference
 * into a signed URL when it answers; the signature keeps a model from naming someone else's file.
 */
export const FILE_REF_PREFIX = 'kiln-file:';

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
  const [row] = await db.delete(files).where(and(eq(files.id, id), eq(files.accountId, accountId))).returning();
  return row;
}
