/**
 * Prefill/decode disaggregation through the HTTP API: with a `prefill` node and a `decode` node
 * up beside the suite's own (role `both`), a long prompt is prefilled on the one, whose KV
 * snapshot the other restores from object storage; both steps are activities of the prediction's
 * history and its metrics name both nodes. A short prompt is not split; a snapshot the decode node
 * cannot find, and a prefill node that is gone, fall back to prefilling on the decode node.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { closeDb, type Db } from '../../db/client';
import type { ModelVersion } from '../../db/models';
import { removeNode } from '../../db/nodes';
import { TINY_LLAMA } from '../../infra/seed';
import { config } from '../../lib/config';
import { newId } from '../../lib/ids';
import { Storage } from '../../lib/storage';
import { ensureTestModel } from '../fixtures/models';
import { api, kvObjectKeys, modelPathOf, newAccount, poll, predictWaiting, testDb } from '../helpers';
import { startEngineNode } from '../processes';
import { scheduledActivities } from '../scheduled-activities';
import { testTemporal } from '../temporal';

jest.setTimeout(300_000);

const PREFILL = `test-prefill-${process.pid}`;
const PREFILL_ELSEWHERE = `test-prefill-elsewhere-${process.pid}`;
const DECODE = `test-decode-${process.pid}`;

let db: Db;
let token: string;
let version: ModelVersion;
let modelPath: string;
let temporal: Awaited<ReturnType<typeof testTemporal>>;
const started = new Map<string, ChildProcess>();
const storage = Storage.fromConfig(config());

async function startNode(nodeId: string, env: Record<string, string>): Promise<void> {
  started.set(nodeId, await startEngineNode(nodeId, 1500, env));
}

async function stopNode(nodeId: string, signal: NodeJS.Signals): Promise<void> {
  const child = started.get(nodeId);
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill(signal);
  await exited;
}

beforeAll(async () => {
  db = testDb();
  temporal = await testTemporal();
  await Promise.all([startNode(PREFILL, { KILN_ENGINE_ROLE: 'prefill' }), startNode(DECODE, { KILN_ENGINE_ROLE: 'decode' })]);
  token = (await newAccount(db, 'prefill-split')).token;
  version = await ensureTestModel(db, `prefill-split-${Date.now()}`, TINY_LLAMA);
  modelPath = await modelPathOf(db, version);
});

afterAll(async () => {
  for (const nodeId of started.keys()) {
    await stopNode(nodeId, 'SIGKILL');
    await removeNode(db, nodeId).catch(() => undefined);
  }
  for (const key of await kvObjectKeys(storage, version.id)) await storage.delete(key);
  await temporal.close();
  await closeDb(db);
});

/** A prompt of some 800 estimated tokens (the suite's KILN_PREFILL_SPLIT_MIN_TOKENS is 600) that no other prediction shares. */
const longPrompt = () =>
  `Batch ${newId()}. ${'The kiln holds the heat of the night, and the potter waits for the dawn. '.repeat(44)}\nQ: When?\nA:`;

const predict = (prompt: string) => predictWaiting(modelPath, token, { prompt, max_tokens: 4, min_tokens: 4, temperature: 0 });

test('GET /v1/hardware shows each node and its role', async () => {
  const r = await api('/v1/hardware', { token });
  expect(r.status).toBe(200);
  const roles = Object.fromEntries(
    r.body.flatMap((h: { roles: Array<{ node: string; role: string }> }) => h.roles.map((n) => [n.node, n.role])),
  );
  expect(roles[PREFILL]).toBe('prefill');
  expect(roles[DECODE]).toBe('decode');
});

test('a long prompt is prefilled on the prefill node and decoded on the decode node, which restores its KV snapshot', async () => {
  const p = await predict(longPrompt());
  expect(p.metrics.input_token_count).toBeGreaterThan(1024);
  expect(p.metrics.input_token_count).toBeLessThan(4096);
  expect(await scheduledActivities(temporal.client, p.id)).toEqual(
    expect.arrayContaining([`prefill on prefill:${PREFILL}`, `predict on sessions:${DECODE}`]),
  );
  expect(p.metrics).toMatchObject({ prefill_node: PREFILL, decode_node: DECODE, prefill_split: 'restored', cache_tier: 'object' });
  expect(p.metrics.kv_transfer_bytes).toBeGreaterThan(0);
  expect(p.metrics.prefill_time).toBeGreaterThan(0);
  expect(p.metrics.restore_time).toBeGreaterThan(0);
  expect(p.metrics.restored_tokens).toBeGreaterThan(1024);
  expect(p.logs).toMatch(new RegExp(`Prefilled \\d+ prompt tokens on node ${PREFILL}`));
  expect(p.logs).toMatch(new RegExp(`restored on node ${DECODE}`));
});

test('a short prompt is not split', async () => {
  const p = await predict(`Short ${newId()}: the kiln is hot.`);
  expect(await scheduledActivities(temporal.client, p.id)).not.toEqual(expect.arrayContaining([expect.stringMatching(/^prefill /)]));
  expect(p.metrics.prefill_node).toBeUndefined();
  expect(p.metrics.decode_node).toBeUndefined();
});

test('a snapshot the decode node cannot find: it prefills the prompt itself', async () => {
  // A prefill node that files its snapshots by a shorter anchor than the decode node looks them up by.
  await stopNode(PREFILL, 'SIGTERM');
  await startNode(PREFILL_ELSEWHERE, { KILN_ENGINE_ROLE: 'prefill', KILN_KV_SNAPSHOT_MIN_TOKENS: '256' });
  await poll(
    () => api('/v1/hardware', { token }),
    (r) => JSON.stringify(r.body).includes(PREFILL_ELSEWHERE) && !JSON.stringify(r.body).includes(`"${PREFILL}"`),
    { timeoutMs: 20_000, intervalMs: 200 },
  );
  const p = await predict(longPrompt());
  expect(await scheduledActivities(temporal.client, p.id)).toEqual(
    expect.arrayContaining([`prefill on prefill:${PREFILL_ELSEWHERE}`, `predict on sessions:${DECODE}`]),
  );
  expect(p.metrics).toMatchObject({ prefill_node: PREFILL_ELSEWHERE, decode_node: DECODE, prefill_split: 'prefilled on the decode node' });
  expect(p.metrics.kv_transfer_bytes).toBe(0);
  expect(p.logs).toMatch(new RegExp(`was not restored here: prefilled on node ${DECODE} instead`));
});

test('a lost prefill node: the decode node prefills the prompt itself', async () => {
  // Killed outright: its row stays live until its heartbeat is stale, so placement still picks it.
  await stopNode(PREFILL_ELSEWHERE, 'SIGKILL');
  const p = await predict(longPrompt());
  expect(await scheduledActivities(temporal.client, p.id)).toEqual(
    expect.arrayContaining([`prefill on prefill:${PREFILL_ELSEWHERE}`, `predict on sessions:${DECODE}`]),
  );
  expect(p.logs).toMatch(new RegExp(`Prefill on node ${PREFILL_ELSEWHERE} failed .*: node ${DECODE} prefills the prompt itself`));
  expect(p.metrics).toMatchObject({ decode_node: DECODE, prefill_split: 'prefilled on the decode node' });
});
