/**
 * Prefill and decode on separate network hosts (infra/netns-hosts.sh): a `prefill` node on host A
 * and a `decode` node on host B, each reaching Postgres, Temporal and the object store only
 * through forwarders on the bridge. A long prompt is prefilled on A, whose KV snapshot goes up to
 * the object store from A's address and comes down to B, which restores it and decodes. The
 * commands that made the hosts are printed.
 */
import type { ChildProcess } from 'node:child_process';
import { closeDb, type Db } from '../../db/client';
import type { ModelVersion } from '../../db/models';
import { removeNode } from '../../db/nodes';
import { TINY_LLAMA } from '../../infra/seed';
import { config } from '../../lib/config';
import { newId } from '../../lib/ids';
import { Storage } from '../../lib/storage';
import { ensureTestModel } from '../fixtures/models';
import { kvObjectKeys, modelPathOf, newAccount, predictWaiting, testDb } from '../helpers';
import { type NetnsHosts, upNetnsHosts } from '../netns-hosts';
import { engineNodeEnv, startEngineNodeOnHost } from '../processes';
import { scheduledActivities } from '../scheduled-activities';
import { testTemporal } from '../temporal';
import { temporalCli } from '../temporal-cli';

jest.setTimeout(300_000);

const PREFILL = `test-host-a-prefill-${process.pid}`;
const DECODE = `test-host-b-decode-${process.pid}`;

let db: Db;
let net: NetnsHosts | undefined;
let token: string;
let version: ModelVersion;
let modelPath: string;
let temporal: Awaited<ReturnType<typeof testTemporal>>;
const engines: ChildProcess[] = [];
const storage = Storage.fromConfig(config());

beforeAll(async () => {
  db = testDb();
  temporal = await testTemporal();
  net = await upNetnsHosts(2, engineNodeEnv());
  const [hostA, hostB] = net.hosts;
  engines.push(
    ...(await Promise.all([
      startEngineNodeOnHost(hostA, PREFILL, 1500, { KILN_ENGINE_ROLE: 'prefill' }),
      startEngineNodeOnHost(hostB, DECODE, 1500, { KILN_ENGINE_ROLE: 'decode' }),
    ])),
  );
  token = (await newAccount(db, 'split-hosts')).token;
  version = await ensureTestModel(db, `split-hosts-${Date.now()}`, TINY_LLAMA);
  modelPath = await modelPathOf(db, version);
});

afterAll(async () => {
  for (const engine of engines) engine.kill('SIGKILL');
  await net?.down();
  for (const node of [PREFILL, DECODE]) await removeNode(db, node).catch(() => undefined);
  if (version) for (const key of await kvObjectKeys(storage, version.id)) await storage.delete(key);
  await temporal.close();
  await closeDb(db);
});

/** A prompt of some 800 estimated tokens (the suite's KILN_PREFILL_SPLIT_MIN_TOKENS is 600) that no other prediction shares. */
const longPrompt = () =>
  `Hosts ${newId()}. ${'The kiln holds the heat of the night, and the potter waits for the dawn. '.repeat(44)}\nQ: When?\nA:`;

/** Greedy, four tokens: the split's two steps are what is looked at. */
const predict = () => predictWaiting(modelPath, token, { prompt: longPrompt(), max_tokens: 4, min_tokens: 4, temperature: 0 });

test('a long prompt is prefilled on host A and decoded on host B, its KV snapshot carried through the object store', async () => {
  // The first split loads the version on both hosts (each downloads it through the store's forwarder).
  const first = await predict();
  expect(first.metrics).toMatchObject({ prefill_node: PREFILL, decode_node: DECODE });

  const store = net!.forwarders.store;
  const [up, down] = [store.bytesUp(), store.bytesDown()];
  const p = await predict();
  const [sent, received] = [store.bytesUp() - up, store.bytesDown() - down];
  console.log(
    `prefill on ${PREFILL}, decode on ${DECODE}: snapshot ${p.metrics.kv_transfer_bytes} bytes; ` +
      `through the store's forwarder ${sent} bytes up, ${received} bytes down\n${net!.commands.join('\n')}\n${p.logs}`,
  );
  // The history as an operator sees it (its result left out): the prefill step on host A's queue, then the decode on host B's.
  const scheduled = await scheduledActivities(temporal.client, p.id);
  const shown = await temporalCli('workflow', 'show', '--workflow-id', `prediction-${p.id}`);
  console.log(
    `temporal workflow show --workflow-id prediction-${p.id}\n${shown.slice(0, shown.indexOf('Results:'))}activities: ${scheduled.join('; ')}`,
  );
  expect(scheduled).toEqual(expect.arrayContaining([`prefill on prefill:${PREFILL}`, `predict on sessions:${DECODE}`]));
  expect(p.metrics).toMatchObject({ prefill_node: PREFILL, decode_node: DECODE, prefill_split: 'restored', cache_tier: 'object' });
  expect(p.metrics.kv_transfer_bytes).toBeGreaterThan(0);
  expect(p.metrics.restored_tokens).toBeGreaterThan(1024);
  // Host A's upload and host B's download of the snapshot both crossed the bridge: nothing else could carry it.
  expect(sent).toBeGreaterThanOrEqual(p.metrics.kv_transfer_bytes);
  expect(received).toBeGreaterThanOrEqual(p.metrics.kv_transfer_bytes);
  expect(p.logs).toMatch(new RegExp(`Prefilled \\d+ prompt tokens on node ${PREFILL}`));
  expect(p.logs).toMatch(new RegExp(`restored on node ${DECODE}`));
});
