import { and, desc, eq, or } from 'drizzle-orm';
import { newId, sha256Hex } from '../lib/ids';
import type { Db } from './client';
import { modelVersions, models, type VersionFile } from './schema';

export type Model = typeof models.$inferSelect;
export type ModelVersion = typeof modelVersions.$inferSelect;

export interface VersionManifest {
  task: string;
  engine: 'llama.cpp' | 'onnxruntime';
  files: VersionFile[];
  memoryBytes: number;
  settings?: Record<string, unknown>;
}

/** A version id is the hash of its manifest, so pushing the same thing twice is one version. */
export function versionIdFor(manifest: VersionManifest): string {
  const canonical = JSON.stringify({
    task: manifest.task,
    engine: manifest.engine,
    files: manifest.files.map((f) => ({ path: f.path, sha256: f.sha256, size: f.size })),
    settings: manifest.settings ?? {},
  });
  return sha256Hex(canonical);
}

export async function upsertModel(
  db: Db,
  m: { ownerId: string; owner: string; name: string; task: string; visibility: 'public' | 'private'; description?: string },
): Promise<Model> {
  const [row] = await db
    .insert(models)
    .values({ id: `mdl_${newId()}`, ...m })
    .onConflictDoUpdate({
      target: [models.owner, models.name],
      set: { description: m.description, visibility: m.visibility },
    })
    .returning();
  return row;
}

export async function addVersion(db: Db, model: Model, manifest: VersionManifest): Promise<ModelVersion> {
  const id = versionIdFor(manifest);
  await db
    .insert(modelVersions)
    .values({ id, modelId: model.id, ...manifest, settings: manifest.settings ?? {} })
    .onConflictDoNothing();
  await db.update(models).set({ latestVersionId: id }).where(eq(models.id, model.id));
  const row = await db.query.modelVersions.findFirst({ where: eq(modelVersions.id, id) });
  return row!;
}

export interface ResolvedVersion {
  model: Model;
  version: ModelVersion;
}

const visibleTo = (accountId: string) => or(eq(models.visibility, 'public'), eq(models.ownerId, accountId));

/** The model `owner/name` if the account may call it, with the given or the latest version. */
export async function resolveModelVersion(
  db: Db,
  accountId: string,
  ref: { owner: string; name: string; versionId?: string },
): Promise<ResolvedVersion | undefined> {
  const model = await db.query.models.findFirst({
    where: and(eq(models.owner, ref.owner), eq(models.name, ref.name), visibleTo(accountId)),
  });
  if (!model) return undefined;
  const versionId = ref.versionId ?? model.latestVersionId;
  if (!versionId) return undefined;
  const version = await db.query.modelVersions.findFirst({
    where: and(eq(modelVersions.id, versionId), eq(modelVersions.modelId, model.id)),
  });
  return version ? { model, version } : undefined;
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
