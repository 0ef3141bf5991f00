import { and, desc, eq, or, type Placeholder, sql } from 'drizzle-orm';
import { type EngineName, type VersionFile, type VersionRetryPolicy } from '../domain/statuses';
import { newId, sha256Hex } from '../lib/ids';
import { builtOnce, type Db } from './client';
import { models, modelVersions } from './schema';

export type Model = typeof models.$inferSelect;
export type ModelVersion = typeof modelVersions.$inferSelect;

export interface VersionManifest {
  task: string;
  engine: EngineName;
  files: VersionFile[];
  memoryBytes: number;
  settings?: Record<string, unknown>;
  retry?: VersionRetryPolicy | null;
}

/**
 * A version id is the hash of its model and manifest: pushing the same thing twice to a model is
 * one version, while two models with the same weights have versions of their own (the weights
 * are still stored once, by content).
 */
export function versionIdFor(modelId: string, manifest: VersionManifest): string {
  const canonical = JSON.stringify({
    modelId,
    task: manifest.task,
    engine: manifest.engine,
    files: manifest.files.map((f) => ({ path: f.path, sha256: f.sha256, size: f.size })),
    settings: manifest.settings ?? {},
    // Only when set, so that versions pushed before retry policies existed keep their ids.
    ...(manifest.retry ? { retry: manifest.retry } : {}),
  });
  return sha256Hex(canonical);
}

export async function upsertModel(
  db: Db,
  m: {
    ownerId: string;
    owner: string;
    name: string;
    task: string;
    visibility: 'public' | 'private';
    description?: string;
    license?: string;
    licenseUrl?: string;
  },
): Promise<Model> {
  const [row] = await db
    .insert(models)
    .values({ id: `mdl_${newId()}`, ...m })
    .onConflictDoUpdate({
      target: [models.owner, models.name],
      set: { description: m.description, visibility: m.visibility, license: m.license, licenseUrl: m.licenseUrl },
    })
    .returning();
  return row;
}

export async function addVersion(db: Db, model: Model, manifest: VersionManifest): Promise<ModelVersion> {
  const id = versionIdFor(model.id, manifest);
  await db
    .insert(modelVersions)
    .values({ id, modelId: model.id, ...manifest, settings: manifest.settings ?? {}, retry: manifest.retry ?? null })
    .onConflictDoNothing();
  await db.update(models).set({ latestVersionId: id }).where(eq(models.id, model.id));
  const row = await db.query.modelVersions.findFirst({ where: eq(modelVersions.id, id) });
  return row!;
}

export interface ResolvedVersion {
  model: Model;
  version: ModelVersion;
}

/** Public, owned, or shared with the account through allowed_accounts. */
export const visibleTo = (accountId: string | Placeholder) =>
  or(eq(models.visibility, 'public'), eq(models.ownerId, accountId), sql`${accountId} = any(${models.allowedAccounts})`);

/** One query: the model, and the version asked for (`version`: else its latest), joined. Every create makes it. */
const modelVersionOf = (version: 'named' | 'latest') =>
  builtOnce((db) =>
    db
      .select({ model: models, version: modelVersions })
      .from(models)
      .innerJoin(
        modelVersions,
        and(
          eq(modelVersions.modelId, models.id),
          eq(modelVersions.id, version === 'named' ? sql.placeholder('version') : models.latestVersionId),
        ),
      )
      .where(
        and(eq(models.owner, sql.placeholder('owner')), eq(models.name, sql.placeholder('name')), visibleTo(sql.placeholder('account'))),
      )
      .limit(1)
      .prepare(`model_version_${version}`),
  );
const namedVersion = modelVersionOf('named');
const latestVersion = modelVersionOf('latest');

/** The model `owner/name` if the account may call it, with the given or the latest version. */
export async function resolveModelVersion(
  db: Db,
  accountId: string,
  ref: { owner: string; name: string; versionId?: string },
): Promise<ResolvedVersion | undefined> {
  const values = { owner: ref.owner, name: ref.name, account: accountId };
  const rows = ref.versionId
    ? await namedVersion(db).execute({ ...values, version: ref.versionId })
    : await latestVersion(db).execute(values);
  return rows[0];
}

/** A bare version id, as Replicate's `version` field takes it. */
export async function resolveVersionId(db: Db, accountId: string, versionId: string): Promise<ResolvedVersion | undefined> {
  const rows = await db
    .select({ model: models, version: modelVersions })
    .from(modelVersions)
    .innerJoin(models, eq(models.id, modelVersions.modelId))
    .where(and(eq(modelVersions.id, versionId), visibleTo(accountId)))
    .orderBy(desc(modelVersions.createdAt))
    .limit(1);
  return rows[0];
}

export async function getVersion(db: Db, versionId: string): Promise<ModelVersion | undefined> {
  return db.query.modelVersions.findFirst({ where: eq(modelVersions.id, versionId) });
}

/** Lets other accounts use a private model (Replicate-style sharing without making it public). */
export async function shareModel(db: Db, modelId: string, accountIds: string[]): Promise<Model> {
  return db.transaction(async (tx) => {
    const [current] = await tx.select().from(models).where(eq(models.id, modelId)).for('update');
    const allowed = [...new Set([...current.allowedAccounts, ...accountIds])];
    const [row] = await tx.update(models).set({ allowedAccounts: allowed }).where(eq(models.id, modelId)).returning();
    return row;
  });
}

/** Makes owner/name private where it exists; nothing where it does not. */
export async function makeModelPrivate(db: Db, owner: string, name: string): Promise<void> {
  await db
    .update(models)
    .set({ visibility: 'private' })
    .where(and(eq(models.owner, owner), eq(models.name, name)));
}

export async function listVisibleModels(db: Db, accountId: string, opts: { limit: number; after?: string }): Promise<Model[]> {
  const cursor = opts.after ? sql`(${models.owner} || '/' || ${models.name}) > ${opts.after}` : undefined;
  return db
    .select()
    .from(models)
    .where(and(visibleTo(accountId), cursor))
    .orderBy(models.owner, models.name)
    .limit(opts.limit + 1);
}

export async function findVisibleModel(db: Db, accountId: string, owner: string, name: string): Promise<Model | undefined> {
  return db.query.models.findFirst({ where: and(eq(models.owner, owner), eq(models.name, name), visibleTo(accountId)) });
}

export async function listVersions(db: Db, modelId: string): Promise<ModelVersion[]> {
  return db.select().from(modelVersions).where(eq(modelVersions.modelId, modelId)).orderBy(desc(modelVersions.createdAt));
}
