/**
 * A long prompt's evaluation outlives the engine process: sent again after a kill -9 and restart
 * of the suite's engine worker, its shared prefix is restored from the KV snapshot on disk, not
 * evaluated again (at 4daa25f: 0 cached tokens after a restart). With the node's disk emptied as
 * well (a node that never saw the prompt), it comes from the object-storage tier.
 */
import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { closeDb, type Db } from '../../db/client';
import type { ModelVersion } from '../../db/models';
import { TINY_LLAMA } from '../../infra/seed';
import { config } from '../../lib/config';
import { Storage } from '../../lib/storage';
import { killSuiteProcess } from '../chaos';
import { ensureTestModel } from '../fixtures/models';
import { api, kvObjectKeys, modelPathOf, newAccount, poll, predictWaiting, testDb } from '../helpers';

jest.setTimeout(240_000);

const SNAPSHOTS = path.join(process.env.KILN_DATA_DIR ?? path.resolve('.data/test'), 'kv', process.env.KILN_NODE_ID ?? 'test-node-1');
const document = 'The kiln holds the heat of the night, and the potter waits for the dawn. '.repeat(12);

let db: Db;
let token: string;
let version: ModelVersion;
let modelPath: string;

beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'kv-restart')).token;
  version = await ensureTestModel(db, `kv-restart-${Date.now()}`, TINY_LLAMA);
  modelPath = await modelPathOf(db, version);
});
const storage = Storage.fromConfig(config());
/** This test's version's snapshots in the object tier. */
const objectsOfVersion = () => kvObjectKeys(storage, version.id);
afterAll(async () => {
  for (const key of await objectsOfVersion()) await storage.delete(key);
  await closeDb(db);
});

const ask = (question: string, text = document) =>
  predictWaiting(modelPath, token, { prompt: `${text}\nQ: ${question}\nA:`, max_tokens: 4, min_tokens: 4, temperature: 0 });

/** The names of the sidecar files of the snapshots on the suite's engine node. */
const sidecarsOnDisk = async () => (await readdir(SNAPSHOTS).catch(() => [] as string[])).filter((f) => f.endsWith('.json'));

/** The snapshots on the suite's engine node for this test's version. */
async function snapshotsOfVersion(): Promise<number> {
  const files = await readdir(SNAPSHOTS).catch(() => [] as string[]);
  const sidecars = await Promise.all(
    files
      .filter((f) => f.endsWith('.json'))
      .map(async (f) => JSON.parse(await readFile(path.join(SNAPSHOTS, f), 'utf8')) as { versionId: string }),
  );
  return sidecars.filter((s) => s.versionId === version.id).length;
}

test('after a kill -9 and restart of the engine, a prompt sent again restores its prefix from disk', async () => {
  const first = await ask('When does the kiln cool?');
  expect(first.metrics.input_token_count).toBeGreaterThan(600);
  await poll(snapshotsOfVersion, (n) => n > 0, { timeoutMs: 30_000 });

  await killSuiteProcess('engine-worker');

  const again = await ask('Who waits for the dawn?');
  expect(again.metrics.restored_tokens).toBeGreaterThan(600);
  expect(again.metrics.cached_tokens).toBeGreaterThanOrEqual(again.metrics.restored_tokens - 1);
  expect(again.logs).toMatch(/Restored \d+ prompt tokens from a KV snapshot on disk/);
});

test('after a restart on an empty disk, a prompt sent again restores its prefix from object storage', async () => {
  const letter = 'Dear potter, the glaze ran in the third firing and the lid stuck fast to the jar. '.repeat(12);
  const onDiskBefore = new Set(await sidecarsOnDisk());
  const first = await ask('What stuck?', letter);
  // A sequence may still hold a few opening tokens of an earlier prompt (live); no snapshot has the letter yet.
  expect(first.metrics.restored_tokens).toBeUndefined();
  expect(['none', 'live']).toContain(first.metrics.cache_tier);
  // Saved on disk before the result returned, uploaded after it (the sidecar last). The earlier
  // test's snapshots may still be going up meanwhile: wait for the letter's own.
  const letterSidecars = (await sidecarsOnDisk()).filter((f) => !onDiskBefore.has(f));
  expect(letterSidecars.length).toBeGreaterThan(0);
  await poll(objectsOfVersion, (keys) => keys.some((k) => letterSidecars.includes(path.basename(k))), { timeoutMs: 30_000 });

  await killSuiteProcess('engine-worker');
  // The restarted engine reads its disk at its first generation: emptied now, it is a node that never saw the letter.
  await rm(SNAPSHOTS, { recursive: true, force: true });

  const r = await api('/openai/v1/completions', {
    token,
    body: { model: modelPath, prompt: `${letter}\nQ: What ran?\nA:`, max_tokens: 4, temperature: 0 },
  });
  expect(r.status).toBe(200);
  expect(r.body.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(600);
  const prediction = await api(`/v1/predictions/${String(r.body.id).replace(/^cmpl-/, '')}`, { token });
  expect(prediction.body.metrics.cache_tier).toBe('object');
  expect(prediction.body.metrics.cached_tokens).toBe(r.body.usage.prompt_tokens_details.cached_tokens);
  expect(prediction.body.logs).toMatch(/Restored \d+ prompt tokens from a KV snapshot in object storage/);
});
