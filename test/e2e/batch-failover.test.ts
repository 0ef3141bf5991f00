/**
 * A second engine node, killed with SIGKILL while it runs a batch's chunks: the chunks are
 * placed again on the surviving node and resume from their last heartbeat checkpoint, and the
 * output holds every input exactly once, in order, with the right output.
 */
import type { ChildProcess } from 'node:child_process';
import { createAccount } from '../../db/accounts';
import { closeDb, type Db } from '../../db/client';
import { addVersion, upsertModel } from '../../db/models';
import { removeNode } from '../../db/nodes';
import { runningChunks } from '../batch-checkpoints';
import { api, newAccount, poll, testDb } from '../helpers';
import { startEngineNode } from '../processes';
import { testTemporal } from '../temporal';

jest.setTimeout(240_000);

let db: Db;
let token: string;
let node2: ChildProcess | undefined;
let temporal: Awaited<ReturnType<typeof testTemporal>>;
const NODE2 = `test-batch-node-2-${process.pid}`;

beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'batch-failover')).token;
  temporal = await testTemporal();
});
afterAll(async () => {
  node2?.kill('SIGKILL');
  await removeNode(db, NODE2).catch(() => undefined);
  await temporal.close();
  await closeDb(db);
});

test('kill -9 of the engine node mid-batch: chunks resume elsewhere, every item once', async () => {
  node2 = await startEngineNode(NODE2);

  // A fresh echo-fixture version, so that it is placed anew (on node 2).
  const owner = await createAccount(db, 'kiln-test', 'Test models');
  const model = await upsertModel(db, {
    ownerId: owner.id,
    owner: owner.username,
    name: `batch-failover-${Date.now()}`,
    task: 'echo-fixture',
    visibility: 'public',
  });
  await addVersion(db, model, { task: 'echo-fixture', engine: 'echo-fixture', files: [], memoryBytes: 1, settings: { sequences: 8 } });

  const total = 60;
  const inputs = Array.from({ length: total }, (_, i) => ({ text: `out ${i}`, sleep_ms: 200 }));
  const created = await api('/v1/batches', { token, body: { version: `${model.owner}/${model.name}`, inputs, chunk_size: 10 } });
  expect(created.status).toBe(201);
  const id = created.body.id;

  // Wait until node 2 is well into a chunk: its heartbeat details show the items it has done.
  const inFlight = await poll(
    () => runningChunks(temporal.client, id),
    (chunks) => chunks.some((c) => c.node === NODE2 && c.items_done >= 3),
    { timeoutMs: 90_000, intervalMs: 100 },
  );
  const victim = inFlight.find((c) => c.node === NODE2 && c.items_done >= 3)!;
  expect(victim.lines).toHaveLength(victim.items_done);
  node2.kill('SIGKILL');

  const done = await poll(
    () => api(`/v1/batches/${id}`, { token }),
    (r) => ['succeeded', 'failed', 'canceled'].includes(r.body.status),
    {
      timeoutMs: 180_000,
      intervalMs: 500,
    },
  ).then((r) => r.body);
  expect(done.status).toBe('succeeded');
  expect(done).toMatchObject({ total, completed: total, failed: 0 });
  // The chunk that was cut off carried on from (at least) the checkpoint seen before the kill.
  const resumed = new RegExp(
    `Chunk ${victim.chunk} .*attempt 1 failed on node ${NODE2}: .*; resuming from item (\\d+) \\((\\d+) of 10 done\\)`,
  );
  const match = resumed.exec(done.logs);
  expect(match).not.toBeNull();
  expect(Number(match![2])).toBeGreaterThanOrEqual(victim.items_done);
  expect(done.logs).toMatch(/Warming up .* on node (?!test-batch-node-2)/);

  const res = await fetch(done.output_file.urls.get);
  const lines = (await res.text())
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as { index: number; output: string });
  expect(lines.map((l) => l.index)).toEqual([...Array(total).keys()]);
  for (const l of lines) expect(l.output).toBe(`out ${l.index}`);
});
