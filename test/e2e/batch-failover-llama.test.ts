/**
 * Batch checkpoint resume on the real engine: a batch of llama.cpp generations (kiln/tiny-llama's
 * weights, paced by the fixture-only token delay) loses its engine node and the control worker
 * to kill -9 mid-batch. Its chunks resume on the surviving node from their checkpoints: every item
 * a checkpoint held comes back word for word. Each item samples with a seed of its own drawn at
 * random, so an item that ran again would almost surely have other text.
 */
import type { ChildProcess } from 'node:child_process';
import { eq } from 'drizzle-orm';
import { closeDb, type Db } from '../../db/client';
import { removeNode } from '../../db/nodes';
import { models } from '../../db/schema';
import type { ChunkProgress } from '../../domain/batch-contracts';
import { TINY_LLAMA } from '../../infra/seed';
import { runningChunks } from '../batch-checkpoints';
import { killSuiteProcess } from '../chaos';
import { ensureTestModel } from '../fixtures/models';
import { api, newAccount, poll, testDb } from '../helpers';
import { startEngineNode } from '../processes';
import { testTemporal } from '../temporal';

jest.setTimeout(240_000);

const NODE2 = `test-batch-llama-node-2-${process.pid}`;
const CHUNK = 6;

let db: Db;
let token: string;
let node2: ChildProcess | undefined;
let temporal: Awaited<ReturnType<typeof testTemporal>>;

beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'batch-llama')).token;
  temporal = await testTemporal();
});
afterAll(async () => {
  node2?.kill('SIGKILL');
  await removeNode(db, NODE2).catch(() => undefined);
  await temporal.close();
  await closeDb(db);
});

test('kill -9 of the engine node and the control worker mid-batch: chunks resume from their checkpoints, no item done twice', async () => {
  node2 = await startEngineNode(NODE2);
  // A fresh version, so that it is placed anew: on node 2, the smaller node. 30 tokens at 50 ms
  // each hold every item at least 1.5 s: a chunk seen with an item done is cut off with 5 to do.
  const version = await ensureTestModel(db, `batch-llama-${Date.now()}`, TINY_LLAMA, { tokenDelayMs: 50 });
  const model = await db.query.models.findFirst({ where: eq(models.id, version.modelId) });

  const total = 3 * CHUNK;
  const inputs = Array.from({ length: total }, (_, i) => ({ prompt: `item ${i}`, max_tokens: 30, min_tokens: 30, temperature: 1.5 }));
  const created = await api('/v1/batches', { token, body: { version: `${model!.owner}/${model!.name}`, inputs, chunk_size: CHUNK } });
  expect(created.status).toBe(201);
  const id = created.body.id;

  const cutOff = (c: ChunkProgress) => c.node === NODE2 && c.items_done >= 1;
  const inFlight = await poll(
    () => runningChunks(temporal.client, id),
    (chunks) => chunks.some(cutOff),
    { timeoutMs: 120_000, intervalMs: 100 },
  );
  node2.kill('SIGKILL');
  await killSuiteProcess('control-worker');
  const victims = inFlight.filter((c) => c.node === NODE2 && c.items_done > 0);
  for (const v of victims) expect(v.lines).toHaveLength(v.items_done);

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
  expect(done.logs).toMatch(/Warming up .* on node (?!test-batch-llama-node-2)/);
  for (const v of victims) {
    const resumed = new RegExp(
      `Chunk ${v.chunk} .*attempt 1 failed on node ${NODE2}: .*; resuming from item (\\d+) \\((\\d+) of ${CHUNK} done\\)`,
    );
    const match = resumed.exec(done.logs);
    expect({ chunk: v.chunk, resumed: match?.[0] ?? done.logs }).toEqual({ chunk: v.chunk, resumed: expect.stringMatching(resumed) });
    expect(Number(match![2])).toBeGreaterThanOrEqual(v.items_done);
  }

  const res = await fetch(done.output_file.urls.get);
  const lines = (await res.text())
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as { index: number; output: string[] });
  expect(lines.map((l) => l.index)).toEqual([...Array(total).keys()]);
  for (const l of lines) expect(l.output.join('').length).toBeGreaterThan(0);
  // What the checkpoints held before the kill is in the output as it was: not generated again.
  const checkpointed = victims.flatMap((v) => v.lines.map((l) => JSON.parse(l) as { index: number; output: string[] }));
  expect(checkpointed.length).toBeGreaterThanOrEqual(1);
  expect(checkpointed).toEqual(checkpointed.map((c) => lines[c.index]));
});
