/**
 * Declared resources are not trusted: a version's memory comes from its weights, settings that
 * multiply it are capped, and pinned replicas count against the account's quota.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { closeDb, type Db } from '../../db/client';
import { estimateLlamaMemoryBytes } from '../../domain/llama-memory';
import { writeLlamaGguf } from '../../tools/gguf/gguf-writer';
import { API_URL, api, newAccount, testDb } from '../helpers';
import { runCli } from '../processes';

jest.setTimeout(120_000);

let db: Db;
let dir: string;
let me: { token: string; username: string };

const SHAPE = { embedding: 128, layers: 3, heads: 4, kvHeads: 2, feedForward: 256, contextLength: 1024 };

async function upload(bytes: Buffer): Promise<string> {
  const digest = createHash('sha256').update(bytes).digest('hex');
  const r = await fetch(`${API_URL}/v1/blobs/sha256/${digest}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${me.token}`, 'content-type': 'application/octet-stream' },
    body: bytes,
  });
  expect([200, 201]).toContain(r.status);
  return digest;
}

beforeAll(async () => {
  db = testDb();
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-resources-'));
  const a = await newAccount(db, 'greedy');
  me = { token: a.token, username: a.account.username };
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await closeDb(db);
});

test("a version's memory is worked out from its GGUF header, whatever it declares; context and sequences are capped", async () => {
  await api('/v1/models', {
    token: me.token,
    body: { owner: me.username, name: 'small-claims', visibility: 'private', task: 'text-generation' },
  });
  const file = path.join(dir, 'm.gguf');
  await writeLlamaGguf(file, { ...SHAPE, seed: Date.now() % 100000 });
  const bytes = await readFile(file);
  const files = [{ path: 'model.gguf', sha256: await upload(bytes), size: bytes.length }];
  const versions = `/v1/models/${me.username}/small-claims/versions`;

  const claimed = await api(versions, { token: me.token, body: { files, memory_bytes: 1, settings: { contextSize: 1024, sequences: 8 } } });
  expect(claimed.status).toBe(201);
  const shape = { layers: SHAPE.layers, embedding: SHAPE.embedding, heads: SHAPE.heads, kvHeads: SHAPE.kvHeads };
  expect(claimed.body.memory_bytes).toBe(estimateLlamaMemoryBytes(bytes.length, shape, 1024, 8));

  // More than the server's figure is kept: the pusher may know better.
  const generous = await api(versions, { token: me.token, body: { files, memory_bytes: 2 ** 33, settings: { sequences: 2 } } });
  expect(generous.body.memory_bytes).toBe(2 ** 33);

  const pastTraining = await api(versions, { token: me.token, body: { files, settings: { contextSize: 4096 } } });
  expect(pastTraining.status).toBe(422);
  expect(pastTraining.body.invalid_fields[0]).toMatchObject({ field: 'settings.contextSize' });
  expect(pastTraining.body.invalid_fields[0].description).toContain('1024');
  const huge = await api(versions, { token: me.token, body: { files, settings: { contextSize: 1_000_000 } } });
  expect(huge.status).toBe(422);
  expect(huge.body.invalid_fields[0].field).toBe('settings.contextSize');
  const many = await api(versions, { token: me.token, body: { files, settings: { sequences: 64 } } });
  expect(many.status).toBe(422);
  expect(many.body.invalid_fields[0]).toMatchObject({ field: 'settings.sequences', description: 'at most 16 on this server' });

  const notGguf = Buffer.from(`plain text, not weights ${Date.now()}`);
  const bad = await api(versions, {
    token: me.token,
    body: { files: [{ path: 'model.gguf', sha256: await upload(notGguf), size: notGguf.length }] },
  });
  expect(bad.status).toBe(422);
  expect(bad.body.invalid_fields[0]).toMatchObject({
    field: 'files.0.sha256',
    description: 'not a readable GGUF file: not a GGUF file (no GGUF magic)',
  });
});

test("deployments' min_instances count against the account's quota of pinned replicas, which an operator may raise", async () => {
  const version = (await api('/v1/models/kiln/echo-fixture', { token: me.token })).body.latest_version.id as string;
  const deploy = (name: string, min: number) =>
    api('/v1/deployments', { token: me.token, body: { name, model: 'kiln/echo-fixture', version, min_instances: min, max_instances: 4 } });
  expect((await deploy('pinned-a', 2)).status).toBe(201);
  const over = await deploy('pinned-b', 1);
  expect(over.status).toBe(422);
  expect(over.body.invalid_fields[0].field).toBe('min_instances');
  expect(over.body.invalid_fields[0].description).toMatch(/would pin 3 replicas; your account's quota \(max_pinned_replicas\) is 2/);
  const raise = await api(`/v1/deployments/${me.username}/pinned-a`, { token: me.token, method: 'PATCH', body: { min_instances: 3 } });
  expect(raise.status).toBe(422);
  expect(raise.body.invalid_fields[0].field).toBe('min_instances');
  expect((await api('/v1/account', { token: me.token })).body.limits.max_pinned_replicas).toBe(2);
  // Unpinned deployments cost nothing.
  expect((await deploy('unpinned', 0)).status).toBe(201);

  await runCli('cli/admin.ts', ['accounts', 'update', me.username, '--max-pinned-replicas', '3']);
  expect((await deploy('pinned-b', 1)).status).toBe(201);
  for (const name of ['pinned-a', 'pinned-b']) {
    const down = await api(`/v1/deployments/${me.username}/${name}`, { token: me.token, method: 'PATCH', body: { min_instances: 0 } });
    expect(down.status).toBe(200);
  }
});

test('a replica bigger than the share of a node one account may pin is refused', async () => {
  await api('/v1/models', { token: me.token, body: { owner: me.username, name: 'hog', visibility: 'private', task: 'echo-fixture' } });
  const bytes = Buffer.from(`hog ${Date.now()}`);
  const v = await api(`/v1/models/${me.username}/hog/versions`, {
    token: me.token,
    body: { files: [{ path: 'hog.bin', sha256: await upload(bytes), size: bytes.length }], engine: 'echo-fixture', memory_bytes: 2 ** 50 },
  });
  expect(v.status).toBe(201);
  const r = await api('/v1/deployments', {
    token: me.token,
    body: { name: 'hog', model: `${me.username}/hog`, version: v.body.id, min_instances: 1 },
  });
  expect(r.status).toBe(422);
  expect(r.body.invalid_fields[0].field).toBe('min_instances');
  expect(r.body.invalid_fields[0].description).toMatch(/one account may pin at most \d+ bytes of a node/);
});
