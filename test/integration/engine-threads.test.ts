/**
 * Speculative decoding alternates two contexts, the draft's and the target's: each must decode on
 * all the engine's threads, not on the half that node-llama-cpp's splitter gives a context while
 * the other still holds a reservation (engines/llama/thread-release.ts). Real native inference
 * on a generated model; the threads of each decode are read where node-llama-cpp's splitter hands
 * them out (without the release, 19 of 51 decodes here got one thread of two).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { textGenerationInput } from '../../domain/tasks/text-generation';
import { LlamaEngine } from '../../engines/llama/engine';
import { writeLlamaGguf } from '../../tools/gguf/gguf-writer';

jest.setTimeout(60_000);

const THREADS = 2;
let dir: string;
const engine = new LlamaEngine({ gpu: 'false', contextSize: 512, sequences: 1, threads: THREADS });

/** The threads the splitter gave each decode of any context, in order. */
const allocations: number[] = [];

beforeAll(async () => {
  // Internals, observed only: the Llama's splitter, which every context asks before each decode.
  const splitter = (await engine.backend()) as unknown as {
    _threadsSplitter: { _getUpdatedActiveThreads(used: number, wanted: number, demanded: number): number };
  };
  const allocate = splitter._threadsSplitter._getUpdatedActiveThreads.bind(splitter._threadsSplitter);
  splitter._threadsSplitter._getUpdatedActiveThreads = (used, wanted, demanded) => {
    const threads = allocate(used, wanted, demanded);
    if (wanted > 0) allocations.push(threads);
    return threads;
  };
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-threads-'));
  const file = path.join(dir, 'calm.gguf');
  await writeLlamaGguf(file, { embedding: 128, layers: 2, heads: 4, feedForward: 256, residualScale: 0.05, seed: 1616, type: 'F32' });
  // The target drafts for itself, four tokens at a time: each round is draft decodes followed at
  // once by the target's check, the hand-over that lost threads.
  await engine.load(
    'self-drafted',
    file,
    { speculative: { type: 'draft', model: 'kiln/tiny', version: 'v1', minConfidence: 0, minDraftTokens: 4, maxDraftTokens: 4 } },
    file,
  );
});

afterAll(async () => {
  await engine.dispose();
  await rm(dir, { recursive: true, force: true });
});

test('the draft and the target each decode on all the threads, handing over many times in one generation', async () => {
  const r = await engine.generate(
    'self-drafted',
    textGenerationInput.parse({ prompt: 'the river and the old house near the garden', max_tokens: 48, temperature: 0, top_k: 1, seed: 1 }),
  );
  // Each drafted run is checked by the target at once, kept or not: many hand-overs either way.
  expect((r.draft?.accepted ?? 0) + (r.draft?.rejected ?? 0)).toBeGreaterThan(30);
  expect(allocations.length).toBeGreaterThan(30);
  expect(allocations.filter((threads) => threads !== THREADS)).toEqual([]);
});
