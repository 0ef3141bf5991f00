/** Models, versions, blobs and `kiln push`, through HTTP and the real CLI process. */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { closeDb, type Db } from '../../db/client';
import { nodes } from '../../db/schema';
import { writeLlamaGguf } from '../../tools/gguf/gguf-writer';
import { API_URL, api, newAccount, poll, testDb } from '../helpers';
import { runCli } from '../processes';

jest.setTimeout(120_000);

let db: Db;
let dir: string;
let me: { token: string; username: string };
let other: string;
beforeAll(async () => {
  db = testDb();
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-push-'));
  const a = await newAccount(db, 'pusher');
  me = { token: a.token, username: a.account.username };
  other = (await newAccount(db, 'looker')).token;
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await closeDb(db);
});

test('create a model, see it listed for its owner only while private', async () => {
  const r = await api('/v1/models', {
    token: me.token,
    body: { owner: me.username, name: 'my-llm', visibility: 'private', task: 'text-generation' },
  });
  expect(r.status).toBe(201);
  expect(r.body).toMatchObject({ owner: me.username, name: 'my-llm', visibility: 'private', latest_version: null });
  expect(
    (
      await api('/v1/models', {
        token: me.token,
        body: { owner: me.username, name: 'my-llm', visibility: 'private', task: 'text-generation' },
      })
    ).status,
  ).toBe(409);
  const wrongOwner = await api('/v1/models', {
    token: me.token,
    body: { owner: 'kiln', name: 'x', visibility: 'public', task: 'text-generation' },
  });
  expect(wrongOwner.status).toBe(422);
  expect(wrongOwner.body.invalid_fields[0].field).toBe('owner');
  const mine = await api('/v1/models', { token: me.token });
  expect(mine.body.results.map((m: { name: string }) => `${m.name}`)).toContain('my-llm');
  expect(mine.body.results.map((m: { owner: string; name: string }) => `${m.owner}/${m.name}`)).toContain('kiln/tiny-llama');
  const theirs = await api('/v1/models', { token: other });
  expect(theirs.body.results.map((m: { owner: string }) => m.owner)).not.toContain(me.username);
  expect((await api(`/v1/models/${me.username}/my-llm`, { token: other })).status).toBe(404);
});

test('blobs are checked against their digest and stored once', async () => {
  const body = Buffer.from(`not really weights ${Date.now()}`);
  const digest = createHash('sha256').update(body).digest('hex');
  const put = (d: string) =>
    fetch(`${API_URL}/v1/blobs/sha256/${d}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${me.token}`, 'content-type': 'application/octet-stream' },
      body,
    });
  const wrong = await put('0'.repeat(64));
  expect(wrong.status).toBe(422);
  expect(
    (await fetch(`${API_URL}/v1/blobs/sha256/${'0'.repeat(64)}`, { method: 'HEAD', headers: { authorization: `Bearer ${me.token}` } }))
      .status,
  ).toBe(404);
  const ok = await put(digest);
  expect(ok.status).toBe(201);
  expect((await ok.json()) as unknown).toEqual({ sha256: digest, size: body.length, created: true });
  const again = await put(digest);
  expect(again.status).toBe(200);
  expect(((await again.json()) as { created: boolean }).created).toBe(false);
  const missing = await api(`/v1/models/${me.username}/my-llm/versions`, {
    token: me.token,
    body: { files: [{ path: 'm.gguf', sha256: 'a'.repeat(64), size: 3 }] },
  });
  expect(missing.status).toBe(422);
  expect(missing.body.invalid_fields[0].field).toBe('files.0.sha256');
});

test('kiln push uploads a GGUF and the version runs: setup_time on the first call, none on the second', async () => {
  const file = path.join(dir, 'pushed.gguf');
  await writeLlamaGguf(file, { embedding: 128, layers: 2, heads: 4, feedForward: 256, seed: Date.now() % 100000 });
  const env = { ...process.env, KILN_API_URL: API_URL, KILN_API_TOKEN: me.token };
  const { stdout } = await runCli('cli/kiln.ts', ['--json', 'push', `${me.username}/my-llm`, file], env);
  const version = JSON.parse(stdout.trim().split('\n').pop()!);
  expect(version.id).toMatch(/^[a-f0-9]{64}$/);
  expect(version.memory_bytes).toBeGreaterThan(version.files[0].size);
  expect(version.openapi_schema.components.schemas.Input.properties.prompt.type).toBe('string');

  const model = await api(`/v1/models/${me.username}/my-llm`, { token: me.token });
  expect(model.body.latest_version.id).toBe(version.id);
  const versions = await api(`/v1/models/${me.username}/my-llm/versions`, { token: me.token });
  expect(versions.body.results.map((v: { id: string }) => v.id)).toEqual([version.id]);

  const first = await api(`/v1/models/${me.username}/my-llm/predictions`, {
    token: me.token,
    body: { input: { prompt: 'hi', max_tokens: 4 } },
    headers: { prefer: 'wait' },
  });
  expect(first.body.status).toBe('succeeded');
  expect(first.body.metrics.setup_time).toBeGreaterThan(0);
  expect(first.body.logs).toMatch(/Downloaded [\d.]+ MiB/);
  const second = await api(`/v1/models/${me.username}/my-llm/predictions`, {
    token: me.token,
    body: { input: { prompt: 'hi', max_tokens: 4 } },
    headers: { prefer: 'wait' },
  });
  expect(second.body.status).toBe('succeeded');
  expect(second.body.metrics.setup_time).toBeUndefined();

  // Pushing the same file again is the same version, with no upload.
  const { stdout: again } = await runCli('cli/kiln.ts', ['--json', 'push', `${me.username}/my-llm`, file], env);
  expect(JSON.parse(again.trim().split('\n').pop()!).id).toBe(version.id);
  // Only the owner pushes.
  expect((await api(`/v1/models/${me.username}/my-llm/versions`, { token: other, body: { files: version.files } })).status).toBe(404);
});

test('scale to zero: an idle version is unloaded, and the next call loads it again from the disk cache', async () => {
  await api('/v1/models', {
    token: me.token,
    body: { owner: me.username, name: 'napper', visibility: 'private', task: 'text-generation' },
  });
  const file = path.join(dir, 'napper.gguf');
  await writeLlamaGguf(file, { embedding: 64, layers: 2, heads: 4, feedForward: 128, seed: (Date.now() + 1) % 100000 });
  const env = { ...process.env, KILN_API_URL: API_URL, KILN_API_TOKEN: me.token };
  const { stdout } = await runCli('cli/kiln.ts', ['--json', 'push', `${me.username}/napper`, file, '--idle-ttl', '1'], env);
  const version = JSON.parse(stdout.trim().split('\n').pop()!);
  expect(version.settings.idleTtlSeconds).toBe(1);
  const call = () =>
    api(`/v1/models/${me.username}/napper/predictions`, {
      token: me.token,
      body: { input: { prompt: 'z', max_tokens: 2 } },
      headers: { prefer: 'wait' },
    });
  const first = await call();
  expect(first.body.status).toBe('succeeded');
  expect(first.body.metrics.setup_time).toBeGreaterThan(0);
  expect(first.body.logs).toMatch(/Loaded in/);
  // The node listed it when it loaded it; by now the 1 s TTL may already have run out, so
  // whether it is still listed is a race, and only its leaving is waited for.
  const loadedOn = async () => (await db.select().from(nodes)).filter((n) => n.loaded.some((l) => l.versionId === version.id));
  await poll(loadedOn, (n) => n.length === 0, { timeoutMs: 30_000, intervalMs: 250 });
  // Cold again: it really was unloaded (a version still loaded would answer warm, with no setup).
  const again = await call();
  expect(again.body.status).toBe('succeeded');
  expect(again.body.metrics.setup_time).toBeGreaterThan(0);
  // Cold, but from the node's disk cache: nothing downloaded this time.
  expect(again.body.logs).not.toMatch(/Downloaded/);
  expect(again.body.logs).toMatch(/Loaded in/);
});

test('hardware lists what the live nodes offer', async () => {
  const r = await api('/v1/hardware', { token: me.token });
  expect(r.status).toBe(200);
  expect(r.body).toEqual(expect.arrayContaining([expect.objectContaining({ sku: 'cpu', nodes: expect.any(Number) })]));
});
