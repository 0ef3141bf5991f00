/**
 * Engine nodes on separate network hosts: network namespaces on a bridge (infra/netns-hosts.sh),
 * each with its own address, reaching Postgres, Temporal and MinIO only through forwarders on the
 * bridge. The API and the control worker stay in the root namespace. In order:
 * - the object store goes down (its forwarder, which is all a host sees of it) while host B
 *   downloads the model, and comes back: the prediction completes;
 * - host B's link goes down a quarter into a long greedy generation: the prediction completes on
 *   host C, its text equal to an uninterrupted run's, and the stream has no `reset` and one `done`;
 * - host B comes back: what it still writes for its superseded attempt is refused.
 * The commands that made the hosts and cut one are printed.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { asc, eq } from 'drizzle-orm';
import { closeDb, createDb, type Db } from '../../db/client';
import { appendOutput, StaleAttemptError } from '../../db/events';
import type { ModelVersion } from '../../db/models';
import { removeNode } from '../../db/nodes';
import { rowToSnapshot, writePredictionSnapshot } from '../../db/predictions';
import { nodes, predictionEvents, predictions } from '../../db/schema';
import { TINY_LLAMA } from '../../infra/seed';
import { expectContinuedExactly, finishedPrediction, startGreedyGeneration, untilQuarterStreamed } from '../exact-generation';
import { ensureTestModel } from '../fixtures/models';
import { newAccount, poll, testDb } from '../helpers';
import { type NetnsHost, type NetnsHosts, upNetnsHosts } from '../netns-hosts';
import { engineNodeEnv, startEngineNodeOnHost } from '../processes';

jest.setTimeout(300_000);

const TOKENS = 1500;
/** Every decode held this long: the cut lands at a quarter however fast the machine is. */
const TOKEN_DELAY_MS = 3;
const NODE_B = `test-host-b-${process.pid}`;
const NODE_C = `test-host-c-${process.pid}`;

let db: Db;
let net: NetnsHosts | undefined;
let hostB: NetnsHost;
let hostC: NetnsHost;
const engines: ChildProcess[] = [];
/** Host B's data directory: its in-flight ledger says which predictions its engine still runs. */
const dataB = mkdtempSync(path.join(os.tmpdir(), 'kiln-host-b-data-'));
let version: ModelVersion;
let reference: any;

beforeAll(async () => {
  db = testDb();
  net = await upNetnsHosts(2, engineNodeEnv());
  [hostB, hostC] = net.hosts;
  // Best fit places a new model on the smallest node that holds it: B first, then C, then the suite's own.
  engines.push(await startEngineNodeOnHost(hostB, NODE_B, 1500, { KILN_DATA_DIR: dataB }));
  engines.push(await startEngineNodeOnHost(hostC, NODE_C, 1600));
});
afterAll(async () => {
  for (const engine of engines) engine.kill('SIGKILL');
  await net?.down();
  for (const node of [NODE_B, NODE_C]) await removeNode(db, node).catch(() => undefined);
  await closeDb(db);
  rmSync(dataB, { recursive: true, force: true });
});

test('the object store goes down while host B downloads the model, and comes back: the prediction completes', async () => {
  const store = net!.forwarders.store;
  const token = (await newAccount(db, 'hosts-reference')).token;
  // A fresh version: host B has to download it through the store's forwarder.
  version = await ensureTestModel(db, `separate-hosts-${Date.now()}`, TINY_LLAMA, { tokenDelayMs: TOKEN_DELAY_MS });
  const size = version.files.reduce((n, f) => n + f.size, 0);
  const before = store.bytesDown();
  const run = await startGreedyGeneration(db, version, token, TOKENS);
  // Down once a third of the weights has reached the host; up again once the host has tried to reconnect.
  await poll(
    async () => store.bytesDown() - before,
    (n) => n >= size / 3,
    { timeoutMs: 120_000, intervalMs: 1 },
  );
  await store.cut();
  const cutAt = store.bytesDown() - before;
  console.log(`object store cut after ${cutAt} of the weights' ${size} bytes reached host B`);
  await poll(
    async () => store.refused(),
    (n) => n >= 1,
    { timeoutMs: 60_000, intervalMs: 10 },
  );
  await store.restore();
  reference = await finishedPrediction(token, run.id, 240_000);
  await run.stream.finished;
  expect(reference.status).toBe('succeeded');
  expect(reference.metrics.output_token_count).toBe(TOKENS);
  expect(store.bytesDown() - before).toBeGreaterThan(size);
  console.log(`host B reconnected ${store.refused()} time(s) while the store was down\n${reference.logs}`);
});

test('host B cut off a quarter into a greedy generation: the prediction completes on host C, as an uninterrupted run', async () => {
  expect(reference.logs).toContain(`on node ${NODE_B}`);
  const token = (await newAccount(db, 'hosts-cut')).token;
  const run = await startGreedyGeneration(db, version, token, TOKENS);
  await untilQuarterStreamed(run.stream, reference);
  net!.cut(hostB);
  const cutAt = Date.now();
  await run.stream.finished;
  const doneAt = Date.now();
  const p = await finishedPrediction(token, run.id, 240_000);
  cutPrediction = run.id;
  console.log(`host B cut → done ${(doneAt - cutAt) / 1000} s; ${p.status}${p.error ? `: ${p.error}` : ''}\n${p.logs}`);

  expectContinuedExactly(p, { reference, tokens: TOKENS, failedNode: NODE_B, stream: run.stream });
  expect(p.logs).toContain(`on node ${NODE_C}`);
});

let cutPrediction: string;

test('host B comes back: the writes of its superseded attempt are refused', async () => {
  const eventsOf = () =>
    db
      .select({ id: predictionEvents.id, event: predictionEvents.event, attempt: predictionEvents.attempt })
      .from(predictionEvents)
      .where(eq(predictionEvents.predictionId, cutPrediction))
      .orderBy(asc(predictionEvents.id));
  const rowOf = async () => (await db.select().from(predictions).where(eq(predictions.id, cutPrediction)))[0];
  const rowBefore = await rowOf();
  const eventsBefore = await eventsOf();
  const restoredAt = new Date();
  net!.restore(hostB);
  // Host B writes to the database again: its node row's heartbeat moves on.
  await poll(
    async () => (await db.select({ at: nodes.heartbeatAt }).from(nodes).where(eq(nodes.id, NODE_B)))[0]?.at,
    (at) => at !== undefined && at > restoredAt,
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  // What B's engine still held of attempt 1 was written, or refused, by now: its activity is over
  // (Temporal answered its first heartbeat since), so it is off B's in-flight ledger.
  const ledger = path.join(dataB, 'inflight', `${NODE_B}.json`);
  await poll(
    async () => (existsSync(ledger) ? readFileSync(ledger, 'utf8') : ''),
    (running) => !running.includes(cutPrediction),
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  expect(await eventsOf()).toEqual(eventsBefore);
  expect(await rowOf()).toEqual(rowBefore);

  // The same writes, made now with the engine's own database role: refused.
  const engineDb = createDb(engineNodeEnv().DATABASE_URL!);
  try {
    await expect(appendOutput(engineDb, cutPrediction, 'stale text', 1)).rejects.toBeInstanceOf(StaleAttemptError);
    const stale = { ...rowToSnapshot(rowBefore), status: 'failed' as const, revision: rowBefore.revision - 1 };
    expect(await writePredictionSnapshot(engineDb, stale, undefined, { existing: true })).toBe(false);
  } finally {
    await closeDb(engineDb);
  }
  expect(await eventsOf()).toEqual(eventsBefore);
  expect(await rowOf()).toEqual(rowBefore);
  // Attempt 1's output that landed came before attempt 2 began (other events, such as `done`, carry no attempt).
  const begun = eventsBefore.find((e) => e.event === 'attempt' && e.attempt === 2);
  expect(begun).toBeDefined();
  const lastOfFirst = Math.max(...eventsBefore.filter((e) => e.event === 'output' && e.attempt === 1).map((e) => e.id));
  expect(lastOfFirst).toBeLessThan(begun!.id);
});
