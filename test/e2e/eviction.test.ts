/**
 * LRU eviction under memory pressure, on a real engine node: when no node has room for a model,
 * placement sends it to the node with the most memory, which unloads its least recently used
 * idle model to make room. An evicted model still runs afterwards: it is loaded again.
 *
 * Memory here is what versions declare and nodes offer (placement and eviction count nothing
 * else), so the sizes are chosen against the suite's own node: each model needs a little more
 * than that node has in all, and the second node, started here, holds two of them but not three.
 */
import type { ChildProcess } from 'node:child_process';
import { eq } from 'drizzle-orm';
import { closeDb, type Db } from '../../db/client';
import { removeNode } from '../../db/nodes';
import { nodes } from '../../db/schema';
import { type LlamaVersion, llamaVersion } from '../fixtures/llama-versions';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { startEngineNode } from '../processes';

jest.setTimeout(180_000);

const NODE1 = process.env.KILN_NODE_ID ?? 'test-node-1';
const BIG = `test-lru-node-${process.pid}`;
const MB = 2 ** 20;

let db: Db;
let me: Awaited<ReturnType<typeof newAccount>>;
let big: ChildProcess | undefined;

beforeAll(async () => {
  db = testDb();
  me = await newAccount(db, 'lru');
});
afterAll(async () => {
  big?.kill('SIGKILL');
  await removeNode(db, BIG).catch(() => undefined);
  await closeDb(db);
});

/** What the node lists as loaded (it writes this on every load and unload). */
async function loadedOn(nodeId: string): Promise<string[]> {
  const [row] = await db.select().from(nodes).where(eq(nodes.id, nodeId));
  return (row?.loaded ?? []).map((l) => l.versionId);
}

async function run(m: LlamaVersion) {
  const created = await api(`/v1/models/${m.ref}/predictions`, { token: me.token, body: { input: { prompt: 'lru', max_tokens: 2 } } });
  expect(created.status).toBe(201);
  const done = await poll(
    () => api(`/v1/predictions/${created.body.id}`, { token: me.token }),
    (r) => TERMINAL.includes(r.body.status),
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  expect(done.body.status).toBe('succeeded');
  return done.body;
}

test('the least recently used idle model is evicted for a new one, and runs again afterwards by loading again', async () => {
  const [node1] = await db.select().from(nodes).where(eq(nodes.id, NODE1));
  expect(node1).toBeDefined();
  // Each model needs 1 MiB more than the suite's node has: only the big node can ever hold one.
  const need = node1.memoryBytes + MB;
  const [a, b, c] = await Promise.all([1, 2, 3].map(() => llamaVersion(db, me.account, { memoryBytes: need })));
  big = await startEngineNode(BIG, Math.ceil((2 * need) / MB) + 1);
  const ids = { a: a.version.id, b: b.version.id, c: c.version.id };

  expect((await run(a)).metrics.setup_time).toBeGreaterThan(0);
  expect((await run(b)).metrics.setup_time).toBeGreaterThan(0);
  expect((await loadedOn(BIG)).sort()).toEqual([ids.a, ids.b].sort());
  // A used again, warm: B is now the least recently used.
  expect((await run(a)).metrics.setup_time).toBeUndefined();

  // No node has room for C: the big node evicts B for it, and keeps A.
  const third = await run(c);
  expect(third.metrics.setup_time).toBeGreaterThan(0);
  expect(third.logs).toContain(`on node ${BIG}`);
  const afterC = await poll(
    () => loadedOn(BIG),
    (l) => !l.includes(ids.b),
  );
  expect(afterC.sort()).toEqual([ids.a, ids.c].sort());

  // B still runs: loaded again, in place of A, now the least recently used.
  const again = await run(b);
  expect(again.metrics.setup_time).toBeGreaterThan(0);
  const afterB = await poll(
    () => loadedOn(BIG),
    (l) => !l.includes(ids.a),
  );
  expect(afterB.sort()).toEqual([ids.b, ids.c].sort());
  expect(await loadedOn(NODE1)).not.toEqual(expect.arrayContaining([ids.a]));
  expect(await loadedOn(NODE1)).not.toEqual(expect.arrayContaining([ids.b]));
  expect(await loadedOn(NODE1)).not.toEqual(expect.arrayContaining([ids.c]));
});
