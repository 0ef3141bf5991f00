/** Deployments: a stable name, min_instances warm ahead of any prediction and never scaled to zero. */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { closeDb, type Db } from '../../db/client';
import { writeLlamaGguf } from '../../tools/gguf/gguf-writer';
import { API_URL, api, newAccount, nodesHolding, poll, testDb } from '../helpers';
import { runCli } from '../processes';

jest.setTimeout(120_000);

let db: Db;
let dir: string;
let me: { token: string; username: string };
beforeAll(async () => {
  db = testDb();
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-deploy-'));
  const a = await newAccount(db, 'deployer');
  me = { token: a.token, username: a.account.username };
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await closeDb(db);
});

test('min_instances is loaded before any prediction, stays loaded past its idle TTL, and serves warm', async () => {
  await api('/v1/models', {
    token: me.token,
    body: { owner: me.username, name: 'served', visibility: 'private', task: 'text-generation' },
  });
  const file = path.join(dir, 'served.gguf');
  await writeLlamaGguf(file, { embedding: 64, layers: 2, heads: 4, feedForward: 128, seed: (Date.now() + 7) % 100000 });
  const env = { ...process.env, KILN_API_URL: API_URL, KILN_API_TOKEN: me.token };
  // An idle TTL of 1 s: without the deployment it would be unloaded at once.
  const { stdout } = await runCli('cli/kiln.ts', ['--json', 'push', `${me.username}/served`, file, '--idle-ttl', '1'], env);
  const version = JSON.parse(stdout.trim().split('\n').pop()!);

  const bad = await api('/v1/deployments', {
    token: me.token,
    body: { name: 'x', model: `${me.username}/served`, version: version.id, min_instances: 3, max_instances: 2 },
  });
  expect(bad.status).toBe(422);
  expect(bad.body.invalid_fields[0].field).toBe('min_instances');

  const created = await api('/v1/deployments', {
    token: me.token,
    body: { name: 'served-prod', model: `${me.username}/served`, version: version.id, hardware: 'cpu', min_instances: 1, max_instances: 2 },
  });
  expect(created.status).toBe(201);
  expect(created.body).toMatchObject({
    owner: me.username,
    name: 'served-prod',
    current_release: {
      number: 1,
      model: `${me.username}/served`,
      version: version.id,
      configuration: { min_instances: 1, max_instances: 2 },
    },
  });

  const holders = (versionId: string) => nodesHolding(db, versionId);
  const loaded = async () => (await holders(version.id)).length > 0;
  await poll(loaded, (x) => x, { timeoutMs: 30_000, intervalMs: 250 });
  const [node] = await holders(version.id);

  // Past the 1 s TTL as the reaper sees it: a version with the same TTL and no deployment, used
  // after this one was loaded, is unloaded from the same node; this one, idle longer, stays.
  await api('/v1/models', {
    token: me.token,
    body: { owner: me.username, name: 'unserved', visibility: 'private', task: 'text-generation' },
  });
  const controlFile = path.join(dir, 'unserved.gguf');
  await writeLlamaGguf(controlFile, { embedding: 64, layers: 2, heads: 4, feedForward: 128, seed: (Date.now() + 8) % 100000 });
  const pushed = await runCli('cli/kiln.ts', ['--json', 'push', `${me.username}/unserved`, controlFile, '--idle-ttl', '1'], env);
  const control = JSON.parse(pushed.stdout.trim().split('\n').pop()!);
  const used = await api(`/v1/models/${me.username}/unserved/predictions`, {
    token: me.token,
    body: { input: { prompt: 'once', max_tokens: 1 } },
    headers: { prefer: 'wait' },
  });
  expect(used.body.status).toBe('succeeded');
  expect(used.body.logs).toContain(`on node ${node}`);
  await poll(
    () => holders(control.id),
    (h) => h.length === 0,
    { timeoutMs: 30_000, intervalMs: 250 },
  );
  expect(await holders(version.id)).toContain(node);

  const p = await api(`/v1/deployments/${me.username}/served-prod/predictions`, {
    token: me.token,
    body: { input: { prompt: 'warm?', max_tokens: 3 } },
    headers: { prefer: 'wait' },
  });
  expect(p.status).toBe(201);
  expect(p.body.status).toBe('succeeded');
  expect(p.body.metrics.setup_time).toBeUndefined();

  const updated = await api(`/v1/deployments/${me.username}/served-prod`, { token: me.token, method: 'PATCH', body: { min_instances: 0 } });
  expect(updated.body.current_release).toMatchObject({ number: 2, configuration: { min_instances: 0 } });
  // Unpinned, the 1 s idle TTL applies again: scaled to zero.
  await poll(loaded, (x) => !x, { timeoutMs: 30_000, intervalMs: 250 });

  const list = await api('/v1/deployments', { token: me.token });
  expect(list.body.results.map((d: { name: string }) => d.name)).toEqual(['served-prod']);
  const { token: other } = await newAccount(db, 'not-deployer');
  expect((await api(`/v1/deployments/${me.username}/served-prod`, { token: other })).status).toBe(404);
  expect(
    (await api(`/v1/deployments/${me.username}/served-prod/predictions`, { token: other, body: { input: { prompt: 'x' } } })).status,
  ).toBe(404);
});
