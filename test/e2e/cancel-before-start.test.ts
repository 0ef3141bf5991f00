/**
 * Cancel before a prediction runs, through the HTTP API: while it waits for one of its
 * account's admission slots (max_running), and while its model warms up on a node. Either way
 * it ends `canceled` without having started, and the account's slot is free afterwards: with
 * max_running 1, the account's next prediction runs.
 */
import type { ChildProcess } from 'node:child_process';
import { updateAccount } from '../../db/accounts';
import { closeDb, type Db } from '../../db/client';
import { removeNode } from '../../db/nodes';
import { nodes } from '../../db/schema';
import { llamaVersion } from '../fixtures/llama-versions';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { startEngineNode } from '../processes';
import { type StallingStorage, startStallingStorage } from '../stalling-storage';

jest.setTimeout(180_000);

let db: Db;
beforeAll(() => {
  db = testDb();
});
afterAll(() => closeDb(db));

const get = (token: string, id: string) => api(`/v1/predictions/${id}`, { token });
const cancel = (token: string, id: string) => api(`/v1/predictions/${id}/cancel`, { token, method: 'POST' });
const ended = (token: string, id: string) =>
  poll(
    () => get(token, id),
    (r) => TERMINAL.includes(r.body.status),
    { timeoutMs: 120_000, intervalMs: 100 },
  ).then((r) => r.body);
const load = (token: string) => api('/v1/account', { token }).then((r) => r.body.current as { admitted: number; queued: number });

/** A fresh account allowed one running prediction at a time. */
async function oneAtATime(prefix: string) {
  const a = await newAccount(db, prefix);
  await updateAccount(db, a.account.id, { maxRunning: 1 });
  return a;
}

test('canceled while waiting for an admission slot: canceled, never started, and the slot goes to the next prediction', async () => {
  const me = await oneAtATime('cancel-admission');
  // Paced: 20 ms a token, so the first prediction holds the only slot until it is canceled.
  const { ref } = await llamaVersion(db, me.account, { tokenDelayMs: 20 });
  const route = `/v1/models/${ref}/predictions`;
  const long = await api(route, { token: me.token, body: { input: { prompt: 'hold the slot', max_tokens: 4000, min_tokens: 4000 } } });
  expect(long.status).toBe(201);
  await poll(
    () => get(me.token, long.body.id),
    (r) => r.body.status === 'processing',
    { timeoutMs: 60_000 },
  );

  const waiting = await api(route, { token: me.token, body: { input: { prompt: 'wait for it', max_tokens: 3 } } });
  expect(waiting.status).toBe(201);
  // One slot held (the long one), one prediction waiting for it.
  await poll(
    () => load(me.token),
    (c) => c.admitted === 1 && c.queued === 1,
  );
  expect((await get(me.token, waiting.body.id)).body.status).toBe('starting');

  expect((await cancel(me.token, waiting.body.id)).status).toBe(200);
  const canceled = await ended(me.token, waiting.body.id);
  expect(canceled.status).toBe('canceled');
  expect(canceled.started_at).toBeNull();
  expect(canceled.output).toBeNull();
  // The long one still runs and holds its slot.
  expect((await get(me.token, long.body.id)).body.status).toBe('processing');
  expect(await load(me.token)).toEqual({ admitted: 1, queued: 0 });

  expect((await cancel(me.token, long.body.id)).status).toBe(200);
  expect((await ended(me.token, long.body.id)).status).toBe('canceled');
  await poll(
    () => load(me.token),
    (c) => c.admitted === 0,
  );
  const next = await api(route, { token: me.token, body: { input: { prompt: 'my turn', max_tokens: 3 } } });
  const done = await ended(me.token, next.body.id);
  expect(done.status).toBe('succeeded');
  expect(done.output.join('').length).toBeGreaterThan(0);
});

describe('canceled during warm-up', () => {
  const NODE = `test-warmup-node-${process.pid}`;
  let node: ChildProcess | undefined;
  let storage: StallingStorage;

  afterAll(async () => {
    storage?.release();
    node?.kill('SIGKILL');
    await removeNode(db, NODE).catch(() => undefined);
    await storage?.close();
  });

  test('canceled while its model downloads: canceled, never started, the slot free, and the next prediction runs', async () => {
    const me = await oneAtATime('cancel-warmup');
    const { ref, version } = await llamaVersion(db, me.account, { memoryBytes: 64 * 2 ** 20 });
    const [{ sha256 }] = version.files;
    // The node's downloads of the model's weights stop part-way until released.
    storage = await startStallingStorage(process.env.S3_ENDPOINT ?? 'http://127.0.0.1:9000', (path) => path.includes(sha256));
    // Room for this version and no more: the best fit of every node, so its warm-up happens there.
    node = await startEngineNode(NODE, 64, { S3_ENDPOINT: storage.endpoint });
    const route = `/v1/models/${ref}/predictions`;

    const cold = await api(route, { token: me.token, body: { input: { prompt: 'cold', max_tokens: 3 } } });
    expect(cold.status).toBe(201);
    const setup = await poll(
      () => api(`/v1/predictions/${cold.body.id}/setup`, { token: me.token }),
      (r) => r.body.phase === 'download',
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    expect(setup.body).toMatchObject({ status: 'starting', file: 'model.gguf', total: version.files[0].size });
    expect(setup.body.bytes).toBeLessThan(setup.body.total);
    expect(storage.held.length).toBeGreaterThan(0);
    expect(await load(me.token)).toEqual({ admitted: 1, queued: 1 });

    expect((await cancel(me.token, cold.body.id)).status).toBe(200);
    const canceled = await ended(me.token, cold.body.id);
    expect(canceled.status).toBe('canceled');
    expect(canceled.started_at).toBeNull();
    expect(canceled.output).toBeNull();
    expect(canceled.logs).toContain(`Warming up ${ref} on node ${NODE}`);
    await poll(
      () => load(me.token),
      (c) => c.admitted === 0 && c.queued === 0,
    );

    storage.release();
    const next = await api(route, { token: me.token, body: { input: { prompt: 'warm now', max_tokens: 3 } } });
    const done = await ended(me.token, next.body.id);
    expect(done.status).toBe('succeeded');
    // It ran where the canceled warm-up had been: that node now serves the version.
    const rows = await db.select().from(nodes);
    expect(rows.filter((n) => n.loaded.some((l) => l.versionId === version.id)).map((n) => n.id)).toEqual([NODE]);
  });
});
