/**
 * A deployment's min_instances survives the death of the node that held its replica: once the
 * node's heartbeat is stale, the replica scaler loads the version on a node that is up, and the
 * deployment serves warm from there.
 */
import type { ChildProcess } from 'node:child_process';
import { closeDb, type Db } from '../../db/client';
import { liveNodes, removeNode } from '../../db/nodes';
import { llamaVersion } from '../fixtures/llama-versions';
import { api, newAccount, nodesHolding, poll, testDb } from '../helpers';
import { startEngineNode } from '../processes';

jest.setTimeout(180_000);

const NODE1 = process.env.KILN_NODE_ID ?? 'test-node-1';
const DOOMED = `test-doomed-node-${process.pid}`;

let db: Db;
let doomed: ChildProcess | undefined;

beforeAll(() => {
  db = testDb();
});
afterAll(async () => {
  doomed?.kill('SIGKILL');
  await removeNode(db, DOOMED).catch(() => undefined);
  await closeDb(db);
});

/** The live nodes (heartbeat within the TTL) that hold the version. */
const holders = (versionId: string) => nodesHolding(db, versionId, { live: true });

test('kill -9 of the node holding a min_instances 1 replica: the replica comes back on a live node, and the deployment serves warm', async () => {
  const me = await newAccount(db, 'min-inst');
  const { ref, version } = await llamaVersion(db, me.account, { memoryBytes: 64 * 2 ** 20 });
  // Room for exactly this version: the best fit of every node, so the deployment's replica lands here.
  doomed = await startEngineNode(DOOMED, 64);

  const name = `kept-${version.id.slice(0, 8)}`;
  const created = await api('/v1/deployments', {
    token: me.token,
    body: { name, model: ref, version: version.id, min_instances: 1, max_instances: 1 },
  });
  expect(created.status).toBe(201);
  try {
    expect(
      await poll(
        () => holders(version.id),
        (h) => h.length > 0,
        { timeoutMs: 60_000, intervalMs: 250 },
      ),
    ).toEqual([DOOMED]);

    doomed.kill('SIGKILL');
    // Placement stops counting the dead node once its heartbeat is stale.
    await poll(
      async () => (await liveNodes(db)).map((n) => n.id),
      (ids) => !ids.includes(DOOMED),
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    // The replica is back, on the node that is up.
    expect(
      await poll(
        () => holders(version.id),
        (h) => h.length > 0,
        { timeoutMs: 60_000, intervalMs: 250 },
      ),
    ).toEqual([NODE1]);

    const p = await api(`/v1/deployments/${me.account.username}/${name}/predictions`, {
      token: me.token,
      body: { input: { prompt: 'still here?', max_tokens: 3 } },
      headers: { prefer: 'wait' },
    });
    expect(p.status).toBe(201);
    expect(p.body.status).toBe('succeeded');
    expect(p.body.metrics.setup_time).toBeUndefined();
  } finally {
    // Unpinned, so the suite's node may scale it to zero.
    await api(`/v1/deployments/${me.account.username}/${name}`, { token: me.token, method: 'PATCH', body: { min_instances: 0 } });
  }
});
