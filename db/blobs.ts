/**
 * Who may see and use a stored blob. Blobs are stored once by content, so their presence in the
 * store says nothing about who may have them: an account may use a digest it uploaded the bytes
 * of, or one that a version of a model it owns, or of a public model, already names. Shared
 * private models (allowed_accounts) do not count: their grantees may run them, not republish
 * their weights under models of their own.
 */
import { and, eq, inArray, or, sql } from 'drizzle-orm';
import type { Db } from './client';
import { blobUploads, models, modelVersions } from './schema';

export async function recordBlobUpload(db: Db, accountId: string, sha256: string, size: number): Promise<void> {
  await db.insert(blobUploads).values({ accountId, sha256, size }).onConflictDoNothing();
}

/** The digests of `digests` that the account may use: uploaded by it, or in a version of a model it owns or of a public one. */
export async function usableBlobs(db: Db, accountId: string, digests: string[]): Promise<Set<string>> {
  const wanted = [...new Set(digests)];
  if (wanted.length === 0) return new Set();
  const uploaded = await db
    .select({ sha256: blobUploads.sha256 })
    .from(blobUploads)
    .where(and(eq(blobUploads.accountId, accountId), inArray(blobUploads.sha256, wanted)));
  const usable = new Set(uploaded.map((r) => r.sha256));
  for (const digest of wanted.filter((d) => !usable.has(d))) {
    const [named] = await db
      .select({ one: sql<number>`1` })
      .from(modelVersions)
      .innerJoin(models, eq(models.id, modelVersions.modelId))
      .where(
        and(
          // Containment, so the GIN index on files answers it.
          sql`${modelVersions.files} @> ${JSON.stringify([{ sha256: digest }])}::jsonb`,
          or(eq(models.visibility, 'public'), eq(models.ownerId, accountId)),
        ),
      )
      .limit(1);
    if (named) usable.add(digest);
  }
  return usable;
}

export async function mayUseBlob(db: Db, accountId: string, sha256: string): Promise<boolean> {
  return (await usableBlobs(db, accountId, [sha256])).has(sha256);
}
