/**
 * KV snapshots on disk (engines/llama/kv-snapshots.ts) with the real llama.cpp engine on a
 * generated model: a prompt evaluated by one engine is restored by a later one (a restarted
 * process) instead of evaluated again, with the same output; a damaged file is never loaded;
 * owners never share; the byte budget holds.
 */
import { mkdtemp, open, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { textGenerationInput } from '../../domain/tasks/text-generation';
import { LlamaEngine } from '../../engines/llama/engine';
import { KvSnapshotStore } from '../../engines/llama/kv-snapshots';
import { TINY_LLAMA } from '../../infra/seed';
import { writeLlamaGguf } from '../../tools/gguf/gguf-writer';

jest.setTimeout(180_000);

let dir: string;
let file: string;
let expected: string;
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

/** An engine as the engine worker makes it, on a store over `snapshots` (none: no store). */
async function engineWith(snapshots?: string, budgetBytes = 2 ** 30) {
  const store = snapshots ? new KvSnapshotStore({ dir: snapshots, budgetBytes, minTokens: 128 }) : undefined;
  const engine = new LlamaEngine({ gpu: 'false', contextSize: 2048, sequences: 2, threads: 1, snapshots: store });
  await engine.load('v1', file);
  return { engine, store };
}

/** The first engine's snapshot of the system prompt and its first turn, saved once its generation ended. */
async function snapshotOfFirstTurn(snapshots: string, owner = 'alice', budgetBytes?: number) {
  const { engine, store } = await engineWith(snapshots, budgetBytes);
  await engine.generate('v1', chat('Light it.'), { owner });
  // Saved before the result returned.
  expect(store!.written).toBe(1);
  await engine.dispose();
  return store!;
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-kv-'));
  file = path.join(dir, 'tiny.gguf');
  await writeLlamaGguf(file, TINY_LLAMA);
  const { engine } = await engineWith();
  const cold = await engine.generate('v1', QUESTION);
  expect(cold.cachedTokens).toBe(0);
  expected = cold.chunks.join('');
  await engine.dispose();
});

afterAll(() => rm(dir, { recursive: true, force: true }));

test('a restarted engine restores the prompt from disk instead of evaluating it, and answers as a cold run does', async () => {
  const snapshots = path.join(dir, 'restart');
  await snapshotOfFirstTurn(snapshots);
  const { engine } = await engineWith(snapshots);
  const second = await engine.generate('v1', QUESTION, { owner: 'alice' });
  await engine.dispose();
  expect(second.restored?.tokens).toBeGreaterThan(200);
  expect(second.cachedTokens).toBeGreaterThanOrEqual(second.restored!.tokens - 1);
  expect(second.cachedTokens).toBeLessThan(second.inputTokens);
  expect(second.chunks.join('')).toBe(expected);
});

test('a damaged snapshot is discarded, never loaded: the prompt is evaluated afresh', async () => {
  const snapshots = path.join(dir, 'damaged');
  await snapshotOfFirstTurn(snapshots);
  const state = (await readdir(snapshots)).find((f) => f.endsWith('.kvstate'))!;
  const handle = await open(path.join(snapshots, state), 'r+');
  await handle.write(Buffer.from('not the state llama.cpp wrote'), 0, undefined, 4096);
  await handle.close();

  const { engine } = await engineWith(snapshots);
  const result = await engine.generate('v1', QUESTION, { owner: 'alice' });
  await engine.dispose();
  expect(result.restored).toBeUndefined();
  expect(result.chunks.join('')).toBe(expected);
  expect(await readdir(snapshots)).not.toContain(state);
});

test('a new process reads every readable sidecar an earlier one left and removes a snapshot whose sidecar is not', async () => {
  const snapshots = path.join(dir, 'sidecars');
  const first = await snapshotOfFirstTurn(snapshots);
  await writeFile(path.join(snapshots, 'broken.json'), '{"name": "broken", ');
  await writeFile(path.join(snapshots, 'broken.kvstate'), 'no state');
  const reopened = new KvSnapshotStore({ dir: snapshots, budgetBytes: 2 ** 30, minTokens: 128 });
  await reopened.open();
  expect(reopened.bytes).toBe(first.bytes);
  expect((await readdir(snapshots)).filter((f) => f.startsWith('broken'))).toEqual([]);
});

test('in one process, a file unchanged since its save is restored; one changed in place since is discarded', async () => {
  const snapshots = path.join(dir, 'same-process');
  const { engine, store } = await engineWith(snapshots);
  try {
    await engine.generate('v1', chat('Light it.'), { owner: 'alice' });
    expect(store!.written).toBe(1);
    // Unloaded and loaded again (as after scale-to-zero): the live context is gone, the disk tier is not.
    await engine.unload('v1');
    await engine.load('v1', file);
    const again = await engine.generate('v1', QUESTION, { owner: 'alice' });
    expect(again.restored?.tier).toBe('disk');
    expect(again.chunks.join('')).toBe(expected);
    const written = store!.written;
    // Every snapshot damaged in place, same size, while the process runs: a file's change time
    // moves, so each is hashed again before a load.
    const states = (await readdir(snapshots)).filter((f) => f.endsWith('.kvstate'));
    expect(states.length).toBeGreaterThan(0);
    for (const state of states) {
      const handle = await open(path.join(snapshots, state), 'r+');
      await handle.write(Buffer.from('not the state llama.cpp wrote'), 0, undefined, 4096);
      await handle.close();
    }
    await engine.unload('v1');
    await engine.load('v1', file);
    const damaged = await engine.generate('v1', QUESTION, { owner: 'alice' });
    expect(damaged.restored).toBeUndefined();
    expect(damaged.cachedTokens).toBe(0);
    expect(damaged.chunks.join('')).toBe(expected);
    // Evaluated afresh, and saved again.
    expect(store!.written).toBe(written + 1);
  } finally {
    await engine.dispose();
  }
});

test("one owner's snapshot is never restored for another", async () => {
  const snapshots = path.join(dir, 'owners');
  await snapshotOfFirstTurn(snapshots, 'alice');
  const { engine } = await engineWith(snapshots);
  const bob = await engine.generate('v1', QUESTION, { owner: 'bob' });
  await engine.dispose();
  expect(bob.restored).toBeUndefined();
  expect(bob.cachedTokens).toBe(0);
});

test('the store keeps to its byte budget', async () => {
  const snapshots = path.join(dir, 'budget');
  const store = await snapshotOfFirstTurn(snapshots, 'alice', 1024);
  expect(store.bytes).toBe(0);
  expect((await readdir(snapshots)).filter((f) => f.endsWith('.kvstate'))).toEqual([]);
});
