/** Prefix reuse in the llama.cpp engine on a generated model: real native inference, no Temporal involved. */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { textGenerationInput } from '../../domain/tasks/text-generation';
import { LlamaEngine } from '../../engines/llama/engine';
import { TINY_LLAMA } from '../../infra/seed';
import { writeLlamaGguf } from '../../tools/gguf/gguf-writer';

jest.setTimeout(120_000);

let dir: string;
let file: string;
const engine = new LlamaEngine({ gpu: 'false', contextSize: 2048, sequences: 2, threads: 1 });
const system = 'You are the kiln keeper. '.repeat(40);
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

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-prefix-'));
  file = path.join(dir, 'tiny.gguf');
  await writeLlamaGguf(file, TINY_LLAMA);
  await engine.load('v1', file);
});

afterAll(async () => {
  await engine.dispose();
  await rm(dir, { recursive: true, force: true });
});

test('a second chat with the same system prompt reuses its tokens and answers as a cold run does', async () => {
  const cold = new LlamaEngine({ gpu: 'false', contextSize: 2048, sequences: 2, threads: 1 });
  await cold.load('v1', file);
  const fresh = await cold.generate('v1', chat('How hot is it?'));
  await cold.dispose();
  expect(fresh.cachedTokens).toBe(0);

  const first = await engine.generate('v1', chat('Light it.'));
  expect(first.cachedTokens).toBe(0);
  const second = await engine.generate('v1', chat('How hot is it?'));
  // The system prompt's tokens at least; the user turns differ, so not the whole prompt.
  expect(second.cachedTokens).toBeGreaterThan(200);
  expect(second.cachedTokens).toBeLessThan(second.inputTokens);
  expect(second.chunks.join('')).toBe(fresh.chunks.join(''));
});

test('the sequence holding the longest shared prefix is the one lent, for completions too', async () => {
  const prompt = (tail: string) =>
    textGenerationInput.parse({ prompt: `${'The fire burns low. '.repeat(30)}${tail}`, max_tokens: 4, temperature: 0 });
  const other = textGenerationInput.parse({ prompt: 'Ash and ember, '.repeat(30), max_tokens: 4, temperature: 0 });
  // At once, so each takes a sequence of its own.
  await Promise.all([engine.generate('v1', prompt('one')), engine.generate('v1', other)]);
  // Two sequences hold two different prompts: each later request finds its own.
  const again = await engine.generate('v1', prompt('two'));
  expect(again.cachedTokens).toBeGreaterThan(100);
  const otherAgain = await engine.generate('v1', other);
  expect(otherAgain.cachedTokens).toBeGreaterThan(100);
});

test('a session keeps its sequence while others come and go', async () => {
  const turn = (user: string) => chat(user);
  const a = await engine.generate('v1', turn('session turn one'), { session: 's1' });
  // Unrelated work fills the other sequence, then takes the free one again (not the session's).
  await engine.generate('v1', textGenerationInput.parse({ prompt: 'Unrelated '.repeat(50), max_tokens: 4 }));
  await engine.generate('v1', textGenerationInput.parse({ prompt: 'Other '.repeat(50), max_tokens: 4 }));
  const b = await engine.generate('v1', turn('session turn two'), { session: 's1' });
  expect(a.inputTokens).toBeGreaterThan(0);
  expect(b.cachedTokens).toBeGreaterThan(200);
});

test("one account's evaluated tokens are never reused for another's request", async () => {
  const mine = await engine.generate('v1', chat('Whose kiln is this?'), { owner: 'alice' });
  expect(mine.inputTokens).toBeGreaterThan(200);
  const again = await engine.generate('v1', chat('Whose kiln is this?'), { owner: 'alice' });
  expect(again.cachedTokens).toBeGreaterThan(200);
  // Both sequences may hold alice's prompt now: bob's identical request reuses nothing of it.
  const theirs = await engine.generate('v1', chat('Whose kiln is this?'), { owner: 'bob' });
  expect(theirs.cachedTokens).toBe(0);
  expect(theirs.chunks.join('')).toBe(mine.chunks.join(''));
});

test('a speculatively decoded version reuses a shared prefix too, its draft following, and answers as a plain cold run does', async () => {
  // Calm blocks: batched and one-token evaluation pick the same greedy tokens (test/e2e/speculative.test.ts).
  const calm = path.join(dir, 'calm.gguf');
  await writeLlamaGguf(calm, { embedding: 128, layers: 2, heads: 4, feedForward: 256, residualScale: 0.05, seed: 1616, type: 'F32' });
  const prompt = (tail: string) =>
    textGenerationInput.parse({
      prompt: `${'the river and the old house near the garden '.repeat(12)}${tail}`,
      max_tokens: 24,
      temperature: 0,
      top_k: 1,
    });
  const plain = new LlamaEngine({ gpu: 'false', contextSize: 1024, sequences: 2, threads: 1 });
  await plain.load('plain', calm);
  const fresh = await plain.generate('plain', prompt('the garden'));
  await plain.dispose();

  const drafted = new LlamaEngine({ gpu: 'false', contextSize: 1024, sequences: 2, threads: 1 });
  try {
    await drafted.load(
      'drafted',
      calm,
      { speculative: { type: 'draft', model: 'kiln/calm', version: 'v1', minConfidence: 0, minDraftTokens: 4, maxDraftTokens: 4 } },
      calm,
    );
    const first = await drafted.generate('drafted', prompt('the house'), { owner: 'alice' });
    expect(first.cachedTokens).toBe(0);
    const second = await drafted.generate('drafted', prompt('the garden'), { owner: 'alice' });
    expect(second.cachedTokens).toBeGreaterThan(100);
    expect(second.cachedTokens).toBeLessThan(second.inputTokens);
    // The draft drafted on the reused sequence (its own state caught up with the target's).
    expect((second.draft?.accepted ?? 0) + (second.draft?.rejected ?? 0)).toBeGreaterThan(0);
    expect(second.chunks.join('')).toBe(fresh.chunks.join(''));
  } finally {
    await drafted.dispose();
  }
});
