/**
 * Replicas with two engine nodes: a backlog on one version makes the scaler load it on the
 * second node, and both serve; a deployment's max_instances keeps it on one; killing one of two
 * serving nodes fails no prediction. The engine is the echo fixture, so service time is exact.
 */
import type { ChildProcess } from 'node:child_process';
import type { Account } from '../../db/accounts';
import { closeDb, type Db } from '../../db/client';
import { addVersion, upsertModel } from '../../db/models';
import { removeNode } from '../../db/nodes';
import { api, newAccount, nodesHolding, poll, TERMINAL, testDb } from '../helpers';
import { startEngineNode } from '../processes';

jest.setTimeout(240_000);

let db: Db;
let me: { account: Account; token: string };
let node2: ChildProcess | undefined;
const NODE1 = process.env.KILN_NODE_ID ?? 'test-node-1';
const NODE2 = `test-replica-node-${process.pid}`;
/** Twice the backlog per replica that adds one (8), with one replica serving two at a time. */
const FLOOD = 40;

beforeAll(async () => {
  db = testDb();
  me = await newAccount(db, 'replicas');
  node2 = await startEngineNode(NODE2);
});
afterAll(async () => {
  node2?.kill('SIGKILL');
  await removeNode(db, NODE2).catch(() => undefined);
  await closeDb(db);
});

/** A version of its own, two predictions at a time per replica, idle replicas gone in seconds. */
async function echoModel(name: string) {
  const model = await upsertModel(db, {
    ownerId: me.account.id,
    owner: me.account.username,
    name,
    task: 'echo-fixture',
    visibility: 'private',
  });
  const version = await addVersion(db, model, {
    task: 'echo-fixture',
    engine: 'echo-fixture',
    files: [],
    memoryBytes: 1,
    settings: { sequences: 2, idleTtlSeconds: 2, name },
  });
  return { name, route: `/v1/models/${me.account.username}/${name}/predictions`, version };
}

/**
 * Each create is retried as a client honouring Retry-After would: after an earlier test restarted
 * Postgres, a pooled connection that died with the old server answers 503 once.
 */
async function flood(route: string, n: number): Promise<string[]> {
  const key = `flood-${Date.now()}`;
  const create = (i: number) => () =>
    api(route, { token: me.token, headers: { 'idempotency-key': `${key}-${i}` }, body: { input: { text: `p${i}`, sleep_ms: 1000 } } });
  const created = await Promise.all(
    Array.from({ length: n }, (_, i) => poll(create(i), (r) => r.status !== 503, { timeoutMs: 30_000, intervalMs: 500 })),
  );
  for (const c of created) expect(c.status).toBe(201);
  return created.map((c) => c.body.id as string);
}

async function finished(ids: string[], onPoll?: () => Promise<void>) {
  return poll(
    async () => {
      await onPoll?.();
      return Promise.all(ids.map(async (id) => (await api(`/v1/predictions/${id}`, { token: me.token })).body));
    },
    (all) => all.every((p) => TERMINAL.includes(p.status)),
    { timeoutMs: 180_000, intervalMs: 500 },
  );
}

/** The nodes that list the version as loaded. */
const holders = (versionId: string) => nodesHolding(db, versionId);

const servedBy = (logs: string) => /slept \d+ ms on node (\S+)/.exec(logs)?.[1];
const failedOn = (logs: string) => /Attempt 1 failed on node (\S+):/.exec(logs)?.[1];

test('a backlog on one version adds a replica on the other node, and both serve it', async () => {
  const { route, version } = await echoModel(`flooded-${Date.now()}`);
  const ids = await flood(route, FLOOD);
  await poll(
    () => holders(version.id),
    (h) => h.includes(NODE1) && h.includes(NODE2),
    { timeoutMs: 60_000, intervalMs: 250 },
  );
  const done = await finished(ids);
  expect(done.map((p) => p.status)).toEqual(ids.map(() => 'succeeded'));
  const served = new Set(done.map((p) => servedBy(p.logs)));
  expect(served).toEqual(new Set([NODE1, NODE2]));
});

test('with max_instances 1, a deployment stays on one node however long its queue', async () => {
  const { name, version } = await echoModel(`capped-${Date.now()}`);
  const created = await api('/v1/deployments', {
    token: me.token,
    body: { name, model: `${me.account.username}/${name}`, version: version.id, max_instances: 1 },
  });
  expect(created.status).toBe(201);
  const ids = await flood(`/v1/deployments/${me.account.username}/${name}/predictions`, FLOOD);
  const seen = new Set<string>();
  const done = await finished(ids, async () => {
    for (const h of await holders(version.id)) seen.add(h);
  });
  expect(done.map((p) => p.status)).toEqual(ids.map(() => 'succeeded'));
  expect(seen.size).toBe(1);
  expect(new Set(done.map((p) => servedBy(p.logs))).size).toBe(1);
});

test('kill -9 of one of two serving nodes fails no prediction', async () => {
  const { route, version } = await echoModel(`survivor-${Date.now()}`);
  const ids = await flood(route, FLOOD);
  await poll(
    () => holders(version.id),
    (h) => h.includes(NODE1) && h.includes(NODE2),
    { timeoutMs: 60_000, intervalMs: 250 },
  );
  // Both serve: wait until each has finished a prediction while a backlog still waits, so both
  // nodes' slots are full when the kill lands.
  await poll(
    () => Promise.all(ids.map(async (id) => (await api(`/v1/predictions/${id}`, { token: me.token })).body)),
    (ps) => {
      const by = ps.map((p) => servedBy(p.logs ?? ''));
      return by.includes(NODE1) && by.includes(NODE2) && ps.filter((p) => p.status === 'starting').length >= 4;
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
  node2!.kill('SIGKILL');
  const done = await finished(ids);
  expect(done.filter((p) => p.status !== 'succeeded')).toEqual([]);
  // The kill cut something short (the backlog kept both nodes busy), and what the dead node had
  // under way ran again on the survivor.
  const interrupted = done.filter((d) => failedOn(d.logs) !== undefined);
  expect(interrupted.length).toBeGreaterThan(0);
  expect(interrupted.map((p) => failedOn(p.logs))).toEqual(interrupted.map(() => NODE2));
  expect(interrupted.map((p) => servedBy(p.logs))).toEqual(interrupted.map(() => NODE1));
});
