/**
 * Weights across accounts: blobs are stored once by content, but an account sees and names only
 * digests it uploaded, or that a model it owns (or a public one) uses; a wrong body never
 * touches the stored blob, even while the right one is being uploaded.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ListMultipartUploadsCommand } from '@aws-sdk/client-s3';
import { closeDb, type Db } from '../../db/client';
import { config } from '../../lib/config';
import { blobKey, Storage } from '../../lib/storage';
import { writeLlamaGguf } from '../../tools/gguf/gguf-writer';
import { API_URL, api, newAccount, poll, testDb } from '../helpers';

jest.setTimeout(120_000);

let db: Db;
let dir: string;
let storage: Storage;
let alice: { token: string; username: string };
let mallory: { token: string; username: string };
let weights: Buffer;
let digest: string;

const head = (token: string, d: string) =>
  fetch(`${API_URL}/v1/blobs/sha256/${d}`, { method: 'HEAD', headers: { authorization: `Bearer ${token}` } });
const put = (token: string, d: string, body: Buffer | ReadableStream<Uint8Array>) =>
  fetch(`${API_URL}/v1/blobs/sha256/${d}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' },
    body,
    duplex: 'half',
  } as RequestInit);
const model = (who: { token: string; username: string }, name: string) =>
  api('/v1/models', { token: who.token, body: { owner: who.username, name, visibility: 'private', task: 'text-generation' } });
const pushVersion = (who: { token: string; username: string }, name: string) =>
  api(`/v1/models/${who.username}/${name}/versions`, {
    token: who.token,
    body: { files: [{ path: 'model.gguf', sha256: digest, size: weights.length }] },
  });

beforeAll(async () => {
  db = testDb();
  storage = Storage.fromConfig(config());
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-weights-'));
  const a = await newAccount(db, 'alice');
  const m = await newAccount(db, 'mallory');
  alice = { token: a.token, username: a.account.username };
  mallory = { token: m.token, username: m.account.username };
  const file = path.join(dir, 'private.gguf');
  await writeLlamaGguf(file, { embedding: 64, layers: 2, heads: 4, feedForward: 128, seed: Date.now() % 100000 });
  weights = await readFile(file);
  digest = createHash('sha256').update(weights).digest('hex');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await closeDb(db);
});

test("another account's private weights read as absent, and a version cannot name them", async () => {
  expect((await model(alice, 'secret')).status).toBe(201);
  expect((await put(alice.token, digest, weights)).status).toBe(201);
  expect((await pushVersion(alice, 'secret')).status).toBe(201);
  const mine = await head(alice.token, digest);
  expect(mine.status).toBe(200);
  expect(mine.headers.get('content-length')).toBe(String(weights.length));

  expect((await head(mallory.token, digest)).status).toBe(404);
  expect((await model(mallory, 'stolen')).status).toBe(201);
  const stolen = await pushVersion(mallory, 'stolen');
  expect(stolen.status).toBe(422);
  expect(stolen.body.invalid_fields[0]).toMatchObject({ field: 'files.0.sha256' });
  expect(stolen.body.invalid_fields[0].description).toContain('model.gguf');
  expect((await api(`/v1/models/${mallory.username}/stolen`, { token: mallory.token })).body.latest_version).toBeNull();
});

test('a public model’s weights are visible to everyone', async () => {
  const tiny = await api('/v1/models/kiln/tiny-llama', { token: mallory.token });
  const file = tiny.body.latest_version.files[0] as { sha256: string; size: number };
  const r = await head(mallory.token, file.sha256);
  expect(r.status).toBe(200);
  expect(r.headers.get('content-length')).toBe(String(file.size));
});

test('a wrong body under a digest being uploaded never touches the stored blob', async () => {
  const file = path.join(dir, 'raced.gguf');
  await writeLlamaGguf(file, { embedding: 64, layers: 2, heads: 4, feedForward: 128, seed: (Date.now() + 5) % 100000 });
  const real = await readFile(file);
  const target = createHash('sha256').update(real).digest('hex');
  // Over one 16 MiB part, so the upload shows in the store while the body is still coming.
  let feed!: ReadableStreamDefaultController<Uint8Array>;
  const garbage = new ReadableStream<Uint8Array>({ start: (c) => void (feed = c) });
  const chunk = new Uint8Array(2 ** 20).fill(7);
  for (let i = 0; i < 17; i++) feed.enqueue(chunk);
  const forged = put(mallory.token, target, garbage);
  const uploadsOf = async () =>
    (await storage.client.send(new ListMultipartUploadsCommand({ Bucket: storage.bucket }))).Uploads?.filter((u) =>
      u.Key?.includes(target),
    ) ?? [];
  await poll(uploadsOf, (u) => u.length > 0, { timeoutMs: 30_000, intervalMs: 100 });

  // The real bytes arrive meanwhile, and are stored.
  expect((await put(alice.token, target, real)).status).toBe(201);
  feed.close();
  const refused = await forged;
  expect(refused.status).toBe(422);
  expect(((await refused.json()) as { invalid_fields: Array<{ field: string }> }).invalid_fields[0].field).toBe('digest');

  expect(await storage.size(blobKey(target))).toBe(real.length);
  expect((await head(alice.token, target)).status).toBe(200);
  expect((await head(mallory.token, target)).status).toBe(404);
  expect(await uploadsOf()).toEqual([]);
});

test('whoever uploads the right bytes of a stored blob may use it: dedupe still works', async () => {
  const again = await put(mallory.token, digest, weights);
  expect(again.status).toBe(200);
  expect(await again.json()).toEqual({ sha256: digest, size: weights.length, created: false });
  expect((await head(mallory.token, digest)).status).toBe(200);
  expect((await pushVersion(mallory, 'stolen')).status).toBe(201);
});
