/** The llama.cpp engine on a generated model: real native inference, no Temporal involved. */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { textGenerationInput } from '../../domain/tasks/text-generation';
import { EngineError } from '../../engines/engine-error';
import { LlamaEngine } from '../../engines/llama/engine';
import { TINY_LLAMA } from '../../infra/seed';
import { nodeCapacity } from '../../lib/hardware';
import { writeLlamaGguf } from '../../tools/gguf/gguf-writer';

jest.setTimeout(60_000);

let dir: string;
const engine = new LlamaEngine({ gpu: 'false', contextSize: 2048, sequences: 2, threads: 1 });
const input = (i: Record<string, unknown>) => textGenerationInput.parse({ prompt: 'The kiln was', ...i });

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-engine-'));
  const file = path.join(dir, 'tiny.gguf');
  await writeLlamaGguf(file, TINY_LLAMA);
  await engine.load('v1', file);
});

afterAll(async () => {
  await engine.dispose();
  await rm(dir, { recursive: true, force: true });
});

test('min_tokens = max_tokens generates exactly that many tokens, as text chunks', async () => {
  const r = await engine.generate('v1', input({ max_tokens: 40, min_tokens: 40, seed: 1 }));
  expect(r.outputTokens).toBe(40);
  expect(r.stopReason).toBe('maxTokens');
  expect(r.chunks.length).toBeGreaterThan(0);
  expect(r.chunks.join('').length).toBeGreaterThan(0);
  expect(r.inputTokens).toBeGreaterThan(0);
});

test('the same seed gives the same text; another seed other text', async () => {
  const a = await engine.generate('v1', input({ max_tokens: 24, min_tokens: 24, seed: 11, temperature: 0.9 }));
  const b = await engine.generate('v1', input({ max_tokens: 24, min_tokens: 24, seed: 11, temperature: 0.9 }));
  const c = await engine.generate('v1', input({ max_tokens: 24, min_tokens: 24, seed: 12, temperature: 0.9 }));
  expect(b.chunks.join('')).toBe(a.chunks.join(''));
  expect(c.chunks.join('')).not.toBe(a.chunks.join(''));
});

/** A generation, with the output's length in tokens after each chunk (what the stream records). */
async function generateCounted(i: ReturnType<typeof input>, opts: { continues?: string; continuedTokens?: number } = {}) {
  const counts: number[] = [];
  const r = await engine.generate('v1', i, { ...opts, onChunk: (_c, tokens) => counts.push(tokens) });
  return { ...r, counts };
}

test('a generation that continues a text goes on from its end, and the text counts towards max_tokens', async () => {
  const ask = { max_tokens: 40, min_tokens: 40, seed: 5, temperature: 0 };
  for (const i of [input(ask), textGenerationInput.parse({ messages: [{ role: 'user', content: 'Tell me' }], ...ask })]) {
    const whole = await generateCounted(i);
    const half = Math.floor(whole.chunks.length / 2);
    const continues = whole.chunks.slice(0, half).join('');
    const rest = await generateCounted(i, { continues, continuedTokens: whole.counts[half - 1] });
    expect({ continued: rest.continuedTokens, total: rest.outputTokens }).toEqual({ continued: whole.counts[half - 1], total: 40 });
    expect(rest.chunks.length).toBeGreaterThan(0);
    // The new chunks come after the text, never repeating it.
    expect(rest.counts[0]).toBeGreaterThan(whole.counts[half - 1]);
  }

  // Without a count the text is tokenized; nothing is left to generate when it already fills max_tokens.
  const full = await engine.generate('v1', input({ ...ask, max_tokens: 5, min_tokens: 0 }), {
    continues: 'The kiln was hot and the kiln was full',
  });
  expect({ chunks: full.chunks, stopReason: full.stopReason }).toEqual({ chunks: [], stopReason: 'maxTokens' });
  expect(full.continuedTokens).toBeGreaterThanOrEqual(5);
});

test('a stop string ends generation before it', async () => {
  const free = await engine.generate('v1', input({ max_tokens: 64, min_tokens: 64, seed: 5, temperature: 0 }));
  const text = free.chunks.join('');
  // Stop on the third word of the unconstrained run: the constrained run must end before it.
  const word = text.trim().split(/\s+/)[2];
  const stopped = await engine.generate('v1', input({ max_tokens: 64, seed: 5, temperature: 0, stop: ` ${word}` }));
  expect(stopped.stopReason).toBe('stop');
  expect(stopped.chunks.join('')).not.toContain(` ${word}`);
  expect(stopped.outputTokens).toBeLessThan(64);
});

test('an abort stops generation and keeps what was generated', async () => {
  const controller = new AbortController();
  let seen = 0;
  const r = await engine.generate('v1', input({ max_tokens: 8000, min_tokens: 8000, seed: 3 }), {
    signal: controller.signal,
    onChunk: (_c, tokens) => {
      seen = tokens;
      if (tokens >= 50) controller.abort();
    },
  });
  expect(r.aborted).toBe(true);
  expect(r.outputTokens).toBeGreaterThanOrEqual(50);
  expect(r.outputTokens).toBeLessThan(8000);
  expect(seen).toBeGreaterThanOrEqual(50);
});

test('two sequences generate concurrently on one context', async () => {
  const [a, b] = await Promise.all([
    engine.generate('v1', input({ max_tokens: 30, min_tokens: 30, seed: 1 })),
    engine.generate('v1', input({ max_tokens: 30, min_tokens: 30, seed: 2 })),
  ]);
  expect(a.outputTokens).toBe(30);
  expect(b.outputTokens).toBe(30);
});

test('more predictions than sequences queue for them, and a released sequence is reused at once', async () => {
  // Each waiter asks for a sequence the moment another is released, while the context still
  // reclaims it: that must neither fail ("No sequences left") nor lose the slot for good.
  const runs = await Promise.all(
    Array.from({ length: 12 }, (_, i) => engine.generate('v1', input({ max_tokens: 3, min_tokens: 3, seed: i }))),
  );
  expect(runs.map((r) => r.outputTokens)).toEqual(Array(12).fill(3));
  const after = await Promise.all([0, 1].map((i) => engine.generate('v1', input({ max_tokens: 3, min_tokens: 3, seed: 100 + i }))));
  expect(after.map((r) => r.outputTokens)).toEqual([3, 3]);
});

test('a version that is not loaded is an error, not a crash', async () => {
  await expect(engine.generate('nope', input({}))).rejects.toThrow(/not loaded/);
});

test('min_tokens holds even where llama.cpp ends on end-of-sequence despite the ban', async () => {
  // With these weights, this prompt and seed, llama.cpp stopped on </s> after 836 tokens.
  const r = await engine.generate('v1', input({ prompt: 'long', max_tokens: 1200, min_tokens: 1200, seed: 1 }));
  expect(r.outputTokens).toBe(1200);
  expect(r.stopReason).toBe('maxTokens');
});

test('a fixture version paced by fixtureTokenDelayMs holds every token on the real engine; without fixtures the setting is ignored', async () => {
  const paced = new LlamaEngine({ gpu: 'false', contextSize: 512, sequences: 1, threads: 1, fixtures: true });
  const unpaced = new LlamaEngine({ gpu: 'false', contextSize: 512, sequences: 1, threads: 1 });
  try {
    const file = path.join(dir, 'tiny.gguf');
    await paced.load('p', file, { fixtureTokenDelayMs: 50 });
    await unpaced.load('p', file, { fixtureTokenDelayMs: 50 });
    const ask = input({ max_tokens: 20, min_tokens: 20, seed: 1, temperature: 0 });
    const slow = await paced.generate('p', ask);
    const fast = await unpaced.generate('p', ask);
    // The same tokens, from the same llama.cpp path...
    expect(slow.chunks.join('')).toBe(fast.chunks.join(''));
    expect(slow.outputTokens).toBe(20);
    // ...each decode held at least 50 ms (a lower bound: it holds on any machine).
    expect(slow.predictSeconds).toBeGreaterThanOrEqual((20 * 50) / 1000);
    expect(slow.predictSeconds).toBeGreaterThan(fast.predictSeconds + 0.5);
  } finally {
    await paced.dispose();
    await unpaced.dispose();
  }
});

test('max_tokens is never exceeded, also where the last token ends mid-character', async () => {
  // Seeds where node-llama-cpp, holding a token that ends mid-character, drew one token more.
  for (const seed of [117, 254, 293]) {
    const r = await engine.generate('v1', textGenerationInput.parse({ prompt: 'and me', max_tokens: 5, min_tokens: 5, seed }));
    expect({ seed, tokens: r.outputTokens, stop: r.stopReason }).toEqual({ seed, tokens: 5, stop: 'maxTokens' });
  }
});

describe('structured output (json_schema)', () => {
  const schema = {
    type: 'object',
    properties: {
      name: { type: 'string' },
      age: { type: 'integer' },
      admin: { type: 'boolean' },
      colour: { enum: ['red', 'green', 'blue'] },
      tags: { type: 'array', items: { type: 'string', maxLength: 12 }, maxItems: 3 },
      address: { type: 'object', properties: { city: { type: 'string' }, zip: { type: ['string', 'null'] } }, required: ['city'] },
    },
    required: ['name', 'age', 'admin', 'colour', 'tags', 'address'],
    additionalProperties: false,
  };
  // The same schema in zod, to check the output independently of the grammar built from it.
  const expected = z.strictObject({
    name: z.string(),
    age: z.number().int(),
    admin: z.boolean(),
    colour: z.enum(['red', 'green', 'blue']),
    tags: z.array(z.string().max(12)).max(3),
    address: z.strictObject({ city: z.string(), zip: z.string().nullable().optional() }),
  });

  test('random weights answer JSON that validates against the schema, on every seed, within max_tokens', async () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const r = await engine.generate('v1', input({ prompt: 'A user:', json_schema: schema, max_tokens: 160, temperature: 1, seed }));
      const text = r.chunks.join('');
      expect({ seed, issues: expected.safeParse(JSON.parse(text)).error?.issues }).toEqual({ seed, issues: undefined });
      expect(r.outputTokens).toBeLessThanOrEqual(160);
    }
  });

  test('chat messages under a schema too; a bare {type: object} (json_object) gives an object', async () => {
    const r = await engine.generate(
      'v1',
      input({
        prompt: undefined,
        messages: [{ role: 'user', content: 'JSON please' }],
        json_schema: { type: 'object' },
        max_tokens: 80,
        seed: 9,
      }),
    );
    const value = JSON.parse(r.chunks.join(''));
    expect(typeof value).toBe('object');
    expect(Array.isArray(value)).toBe(false);
  });

  test('a multi-byte character split across byte tokens streams whole: no U+FFFD in any chunk', async () => {
    const text = 'café ☕ garden ünd 日本';
    // This vocabulary has no token for é, ☕, ü, 日 or 本: each is two to three byte tokens.
    const streamed: string[] = [];
    const r = await engine.generate('v1', input({ json_schema: { const: text }, max_tokens: 60, seed: 1 }), {
      onChunk: (c) => streamed.push(c),
    });
    expect(r.chunks.join('')).toBe(JSON.stringify(text));
    expect(streamed.join('')).toBe(JSON.stringify(text));
    expect(streamed.filter((c) => c.includes('\uFFFD'))).toEqual([]);
  });
});

test('free text never carries U+FFFD, though random weights draw lone byte tokens', async () => {
  for (const seed of [1, 2, 3]) {
    const r = await engine.generate('v1', input({ max_tokens: 300, min_tokens: 300, seed, temperature: 1.5 }));
    expect(r.chunks.filter((c) => c.includes('\uFFFD'))).toEqual([]);
  }
});

describe('context limits', () => {
  const words = (n: number) => Array.from({ length: n }, (_, i) => ['kiln', 'clay', 'glaze', 'fire'][i % 4]).join(' ');

  test('a prompt longer than the context fails at once, non-retryable, naming input.prompt', async () => {
    const started = performance.now();
    const err = await engine.generate('v1', input({ prompt: words(5000) })).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(EngineError);
    expect(err).toMatchObject({ type: 'ContextLengthExceeded' });
    expect((err as Error).message).toMatch(/^input\.prompt: the prompt is \d+ tokens, more than the model's context of 2048 tokens/);
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  test('chat messages longer than the context name input.messages', async () => {
    await expect(
      engine.generate(
        'v1',
        input({
          prompt: undefined,
          messages: [
            { role: 'system', content: words(3000) },
            { role: 'user', content: 'hi' },
          ],
        }),
      ),
    ).rejects.toMatchObject({
      type: 'ContextLengthExceeded',
      message: expect.stringMatching(/^input\.messages: /),
    });
  });

  test('a prompt that fills most of the context is evaluated whole, not cut at the front to leave room', async () => {
    // Two prompts that differ only in their first word: cut at the front (node-llama-cpp's
    // LlamaCompletion leaves a tenth of the context free), they would be the same tokens, and the
    // second would find the first's all in its sequence.
    let n = 300;
    while (engine.tokenCount('v1', words(n + 10)) < 1900) n += 10;
    const tail = words(n);
    const first = await engine.generate('v1', input({ prompt: `alpha ${tail}`, max_tokens: 8, seed: 1 }));
    expect(first.inputTokens).toBeGreaterThan(0.9 * 2048);
    expect(first.inputTokens).toBeLessThan(2048 - 8);
    const second = await engine.generate('v1', input({ prompt: `omega ${tail}`, max_tokens: 8, seed: 1 }));
    expect(second.cachedTokens).toBeLessThan(16);
  });

  test('a prompt that fits with less room than max_tokens generates up to the end of the context, with no context shift', async () => {
    const prompt = words(330);
    const r = await engine.generate(
      'v1',
      input({ prompt: undefined, messages: [{ role: 'user', content: prompt }], max_tokens: 500, min_tokens: 500, seed: 1 }),
    );
    expect(r.inputTokens).toBeGreaterThan(1548);
    expect(r.inputTokens + r.outputTokens).toBe(2048);
    expect(r.stopReason).toBe('maxTokens');
  });
});

test('with the GPU off the engine reports no GPU state, so its node offers its RAM budget as SKU cpu', async () => {
  const state = await engine.gpuState();
  expect(state).toBeNull();
  expect(nodeCapacity({ gpu: state, cpuMemoryBytes: 123 * 2 ** 20 })).toEqual({ memoryBytes: 123 * 2 ** 20, gpu: null, sku: 'cpu' });
});
