/**
 * The object-storage tier of KV snapshots (engines/llama/kv-object-tier.ts) on the real MinIO and
 * llama.cpp: a prefix evaluated on one node is restored on a node that never saw it (an empty
 * disk: another node, or a version warmed up again after scaling to zero), with the output of a
 * cold run; a damaged object is discarded and the prompt evaluated afresh; the tier keeps to its
 * byte budget, and a restore counts as a use. Each test files its snapshots under a prefix of its
 * own and removes it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import type { Token } from 'node-llama-cpp';
import { textGenerationInput } from '../../domain/tasks/text-generation';
import { LlamaEngine } from '../../engines/llama/engine';
import { KvObjectTier, type KvSnapshotEntry } from '../../engines/llama/kv-object-tier';
import { KvSnapshotStore } from '../../engines/llama/kv-snapshots';
import { TINY_LLAMA } from '../../infra/seed';
import { config } from '../../lib/config';
import { newId } from '../../lib/ids';
import { Storage } from '../../lib/storage';
import { writeLlamaGguf } from '../../tools/gguf/gguf-writer';

jest.setTimeout(180_000);

const storage = Storage.fromConfig(config());
const MIN_TOKENS = 128;
let dir: string;
let file: string;
let expected: string;
const prefixes: string[] = [];
const system = 'You are the kiln keeper, and the kiln burns all night. '.repeat(30);
const chat = (user: string) =>
  textGenerationInput.parse({
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: user },
    ],
    max_tokens: 16,
    min_tokens: 16,
    temperature: 0,
  });
const QUESTION = chat('How hot is it?');

/** A prefix of the bucket for one test's tier. */
function tierPrefix(): string {
  const prefix = `kv-test/${newId()}/`;
  prefixes.push(prefix);
  return prefix;
}

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

async function keysUnder(prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const page of storage.list(prefix)) keys.push(...page);
  return keys;
}

/** A node: an engine on an empty disk of its own, with the tier at `prefix`. */
async function node(prefix: string, budgetBytes = 2 ** 30) {
  const objects = new KvObjectTier(storage, { budgetBytes, minTokens: MIN_TOKENS, prefix });
  const snapshots = await mkdtemp(path.join(dir, 'node-'));
  const store = new KvSnapshotStore({ dir: snapshots, budgetBytes: 2 ** 30, minTokens: MIN_TOKENS, objects });
  const engine = new LlamaEngine({ gpu: 'false', contextSize: 2048, sequences: 2, threads: 1, snapshots: store });
  await engine.load('v1', file);
  return { engine, store, snapshots };
}

/** One node evaluates the system prompt and a first turn; its snapshot is in the tier once the upload ended. */
async function firstTurnOnAnotherNode(prefix: string, owner = 'alice', budgetBytes?: number): Promise<void> {
  const { engine, store } = await node(prefix, budgetBytes);
  const first = await engine.generate('v1', chat('Light it.'), { owner });
  expect(first.cacheTier).toBe('none');
  await store.settled();
  await engine.dispose();
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-kv-object-'));
  file = path.join(dir, 'tiny.gguf');
  await writeLlamaGguf(file, TINY_LLAMA);
  const engine = new LlamaEngine({ gpu: 'false', contextSize: 2048, sequences: 2, threads: 1 });
  await engine.load('v1', file);
  const cold = await engine.generate('v1', QUESTION);
  expect(cold.cacheTier).toBe('none');
  expected = cold.chunks.join('');
  await engine.dispose();
});

afterAll(async () => {
  for (const prefix of prefixes) for (const key of await keysUnder(prefix)) await storage.delete(key);
  await rm(dir, { recursive: true, force: true });
});

test('a node that never saw the prefix restores it from object storage, and answers as a cold run does', async () => {
  const prefix = tierPrefix();
  await firstTurnOnAnotherNode(prefix);
  const keys = await keysUnder(prefix);
  expect(keys.filter((k) => k.endsWith('.kvstate'))).toHaveLength(1);
  expect(keys.filter((k) => k.endsWith('.json'))).toHaveLength(1);

  const { engine, snapshots } = await node(prefix);
  const second = await engine.generate('v1', QUESTION, { owner: 'alice' });
  expect(second.cacheTier).toBe('object');
  expect(second.restored?.tier).toBe('object');
  expect(second.restored?.tokens).toBeGreaterThan(200);
  expect(second.cachedTokens).toBeGreaterThanOrEqual(second.restored!.tokens - 1);
  expect(second.chunks.join('')).toBe(expected);
  // The download went to this node's disk (beside the snapshot of this turn): scaled to zero and warmed up again, it restores from there.
  expect(await readdir(snapshots)).toContain(`${second.restored!.name}.kvstate`);
  await engine.unload('v1');
  await engine.load('v1', file);
  const third = await engine.generate('v1', QUESTION, { owner: 'alice' });
  expect(third.cacheTier).toBe('disk');
  expect(third.chunks.join('')).toBe(expected);
  await engine.dispose();

  // Owners never share, in this tier either.
  const other = await node(prefix);
  const bob = await other.engine.generate('v1', QUESTION, { owner: 'bob' });
  expect(bob.cacheTier).toBe('none');
  expect(bob.chunks.join('')).toBe(expected);
  await other.engine.dispose();
});

test('a damaged object is discarded, never loaded: the prompt is evaluated afresh', async () => {
  const prefix = tierPrefix();
  await firstTurnOnAnotherNode(prefix);
  const state = (await keysUnder(prefix)).find((k) => k.endsWith('.kvstate'))!;
  const size = (await storage.size(state))!;
  // Same length, other bytes: only the checksum can tell.
  await storage.putBytes(state, Buffer.alloc(size, 7), 'application/octet-stream');

  const { engine, snapshots } = await node(prefix);
  const result = await engine.generate('v1', QUESTION, { owner: 'alice' });
  expect(result.restored).toBeUndefined();
  expect(result.cachedTokens).toBe(0);
  expect(result.chunks.join('')).toBe(expected);
  await engine.dispose();
  // Gone from the tier and never written to the node's disk; this node's own snapshot replaced it.
  const left = await keysUnder(prefix);
  expect(left).not.toContain(state);
  expect((await readdir(snapshots)).filter((f) => f.endsWith('.download'))).toEqual([]);
});

test('the tier keeps to its byte budget, least recently used out first', async () => {
  const prefix = tierPrefix();
  await firstTurnOnAnotherNode(prefix, 'alice');
  const [alice] = (await keysUnder(prefix)).filter((k) => k.endsWith('.kvstate'));
  const bytes = (await storage.size(alice))!;
  // Room for one snapshot and a half: bob's upload evicts alice's, the older one.
  await firstTurnOnAnotherNode(prefix, 'bob', Math.floor(bytes * 1.5));
  const states = (await keysUnder(prefix)).filter((k) => k.endsWith('.kvstate'));
  expect(states).toHaveLength(1);
  expect(states).not.toContain(alice);
  expect((await keysUnder(prefix)).filter((k) => k.endsWith('.json'))).toHaveLength(1);
});

test('a snapshot restored from the tier counts as used: eviction takes the one used least recently', async () => {
  const prefix = tierPrefix();
  await firstTurnOnAnotherNode(prefix, 'alice');
  await firstTurnOnAnotherNode(prefix, 'bob');
  const states = async () => (await keysUnder(prefix)).filter((k) => k.endsWith('.kvstate'));
  const [alice, bob] = await Promise.all(['alice', 'bob'].map(async (owner) => (await states()).find((k) => k.includes(sha256(owner)))!));
  // Alice's snapshot is restored on a third node, after bob's upload: it is now the newer of the two.
  const reader = await node(prefix);
  expect((await reader.engine.generate('v1', QUESTION, { owner: 'alice' })).cacheTier).toBe('object');
  await reader.store.settled();
  await reader.engine.dispose();
  expect(await states()).toHaveLength(3);
  const largest = Math.max(...(await Promise.all((await states()).map(async (k) => (await storage.size(k))!))));
  // Carol's upload leaves room for three of the four: bob's, used least recently, goes.
  await firstTurnOnAnotherNode(prefix, 'carol', Math.floor(largest * 3.5));
  const left = await states();
  expect(left).toHaveLength(3);
  expect(left).toContain(alice);
  expect(left).not.toContain(bob);
});

test('eviction lists the whole tier only once the puts since its last listing may pass the budget', async () => {
  const prefix = tierPrefix();
  const MiB = 2 ** 20;
  const reported: number[] = [];
  const tier = new KvObjectTier(storage, { budgetBytes: 5.5 * MiB, minTokens: MIN_TOKENS, prefix, onBytes: (b) => reported.push(b) });
  const stateFile = path.join(dir, 'one-mib.kvstate');
  await writeFile(stateFile, randomBytes(MiB));
  // Entries of their own (names and tokens differ), 1 MiB each; the tier checks nothing but their keys here.
  const entry = (i: number): KvSnapshotEntry => ({
    name: sha256(`listing-${i}`),
    versionId: 'v1',
    owner: 'alice',
    tokens: Array.from({ length: MIN_TOKENS + i }, (_, t) => (t + i) as Token),
    bytes: MiB,
  });
  const send = jest.spyOn(storage.client, 'send');
  const listings = () => send.mock.calls.filter(([command]) => command instanceof ListObjectsV2Command).length;
  try {
    await tier.upload(entry(0), stateFile);
    // The first eviction lists: the node knows nothing of the tier yet.
    expect(listings()).toBe(1);
    for (let i = 1; i < 5; i++) await tier.upload(entry(i), stateFile);
    // 5 MiB within 5.5: nothing listed again, the bytes told from what was listed plus the puts since.
    expect(listings()).toBe(1);
    expect(reported.at(-1)).toBe(5 * MiB);
    await tier.upload(entry(5), stateFile);
    // 6 MiB may pass the budget: listed, and one snapshot evicted (which one, the tests above show).
    expect(listings()).toBe(2);
    expect((await keysUnder(prefix)).filter((k) => k.endsWith('.kvstate'))).toHaveLength(5);
    expect(reported.at(-1)).toBe(5 * MiB);
  } finally {
    send.mockRestore();
  }
});
