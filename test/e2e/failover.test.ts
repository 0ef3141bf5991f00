/**
 * A second engine node, killed with SIGKILL in the middle of a generation: the prediction is
 * placed again on the surviving node and succeeds, and the logs say what happened.
 */
import type { ChildProcess } from 'node:child_process';
import { eq } from 'drizzle-orm';
import { closeDb, type Db } from '../../db/client';
import { removeNode } from '../../db/nodes';
import { models } from '../../db/schema';
import { ensureTestModel, PACED_TOKEN_MS, TEST_LLAMA } from '../fixtures/models';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { startEngineNode } from '../processes';

jest.setTimeout(180_000);

let db: Db;
let token: string;
let node2: ChildProcess | undefined;
const NODE2 = `test-node-2-${process.pid}`;

beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'failover')).token;
});
afterAll(async () => {
  node2?.kill('SIGKILL');
  await removeNode(db, NODE2).catch(() => undefined);
  await closeDb(db);
});

test('kill -9 of the engine node during inference: the prediction fails over and succeeds', async () => {
  node2 = await startEngineNode(NODE2);

  // A fresh model, so a fresh version to place, on the usual test weights, paced: 300 tokens
  // last 6 s or more on any machine, so the kill lands mid-generation.
  const version = await ensureTestModel(db, `failover-${Date.now()}`, TEST_LLAMA, { tokenDelayMs: PACED_TOKEN_MS });
  const model = await db.query.models.findFirst({ where: eq(models.id, version.modelId) });
  const created = await api(`/v1/models/${model!.owner}/${model!.name}/predictions`, {
    token,
    body: { input: { prompt: 'keep going', max_tokens: 300, min_tokens: 300, seed: 1 } },
  });
  expect(created.status).toBe(201);
  const id = created.body.id;
  const running = await poll(
    () => api(`/v1/predictions/${id}`, { token }),
    (r) => r.body.status !== 'starting',
    { timeoutMs: 60_000 },
  );
  expect(running.body.status).toBe('processing');
  expect(running.body.logs).toContain(`on node ${NODE2}`);

  node2.kill('SIGKILL');
  const done = await poll(
    () => api(`/v1/predictions/${id}`, { token }),
    (r) => TERMINAL.includes(r.body.status),
    {
      timeoutMs: 150_000,
      intervalMs: 500,
    },
  ).then((r) => r.body);
  expect(done.status).toBe('succeeded');
  expect(done.metrics.output_token_count).toBe(300);
  expect(done.logs).toMatch(new RegExp(`Attempt 1 failed on node ${NODE2}: .*placing the model again`));
  expect(done.logs).toMatch(/Warming up .* on node (?!test-node-2)/);
});
