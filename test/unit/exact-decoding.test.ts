/** The pure parts of exact decoding: chunk seeds, which requests are repeatable, and a generation's key. */
import type { Token } from 'node-llama-cpp';
import { textGenerationInput } from '../../domain/tasks/text-generation';
import {
  checkpointDueAfterMs,
  checkpointStart,
  chunkSeed,
  decodesExactly,
  generationKey,
  isRepeatable,
} from '../../engines/llama/exact-decoding';

test('chunk 0 samples with the request seed; later chunks with distinct 32-bit seeds derived from it', () => {
  expect(chunkSeed(77, 0)).toBe(77);
  const seeds = Array.from({ length: 50 }, (_, i) => chunkSeed(77, i + 1));
  expect(new Set(seeds).size).toBe(50);
  for (const s of seeds) expect(Number.isInteger(s) && s >= 0 && s < 2 ** 32).toBe(true);
  expect(chunkSeed(78, 3)).not.toBe(chunkSeed(77, 3));
  expect(chunkSeed(77, 3)).toBe(chunkSeed(77, 3));
});

test('greedy and seeded requests are repeatable; unseeded sampling is not', () => {
  expect(isRepeatable(textGenerationInput.parse({ prompt: 'x', temperature: 0 }))).toBe(true);
  expect(isRepeatable(textGenerationInput.parse({ prompt: 'x', temperature: 0.8, seed: 1 }))).toBe(true);
  expect(isRepeatable(textGenerationInput.parse({ prompt: 'x', temperature: 0.8 }))).toBe(false);
});

test("a generation's key: the same for the same version, owner, input and drawn seed; greedy ignores the seed", () => {
  const greedy = textGenerationInput.parse({ prompt: 'x', temperature: 0 });
  const sampled = textGenerationInput.parse({ prompt: 'x', temperature: 0.8, seed: 5 });
  expect(generationKey('v', 'a', greedy, 1)).toBe(generationKey('v', 'a', greedy, 2));
  expect(generationKey('v', 'a', sampled, 5)).not.toBe(generationKey('v', 'a', sampled, 6));
  expect(generationKey('v', 'a', greedy, 1)).not.toBe(generationKey('v', 'b', greedy, 1));
  expect(generationKey('v', 'a', greedy, 1)).not.toBe(generationKey('w', 'a', greedy, 1));
});

describe('which generations decode exactly', () => {
  const job = {
    plainPrompt: true,
    grammar: false,
    speculative: false,
    request: { temperature: 0 },
    continues: '',
    continuedTokensKnown: false,
  };
  test('a repeatable completion or plain chat with no grammar and no draft model does', () => {
    expect(decodesExactly(job)).toBe(true);
    expect(decodesExactly({ ...job, request: { temperature: 0.8, seed: 3 } })).toBe(true);
  });
  test('a chat that needs LlamaChat, a grammar, a draft model or an unseeded sample does not', () => {
    expect(decodesExactly({ ...job, plainPrompt: false })).toBe(false);
    expect(decodesExactly({ ...job, grammar: true })).toBe(false);
    expect(decodesExactly({ ...job, speculative: true })).toBe(false);
    expect(decodesExactly({ ...job, request: { temperature: 0.8 } })).toBe(false);
  });
  test("a continuation does only where the continued text's token count is known", () => {
    expect(decodesExactly({ ...job, continues: 'so far' })).toBe(false);
    expect(decodesExactly({ ...job, continues: 'so far', continuedTokensKnown: true })).toBe(true);
  });
});

test('a checkpoint starts decoding after the prompt where it holds the prompt; otherwise it is no start', () => {
  const t = (...n: number[]) => n as Token[];
  expect(checkpointStart({ held: t(1, 2, 3, 10, 11), pending: t(12) }, t(1, 2, 3))).toEqual([10, 11, 12]);
  expect(checkpointStart({ held: t(1, 2, 3), pending: t() }, t(1, 2, 3))).toEqual([]);
  expect(checkpointStart({ held: t(1, 9, 3, 10), pending: t(12) }, t(1, 2, 3))).toBeUndefined();
  expect(checkpointStart({ held: t(1, 2), pending: t(3) }, t(1, 2, 3))).toBeUndefined();
});

test("the next checkpoint waits until the save's time is the given share of the time since it began", () => {
  const saveMs = 200;
  const dueAfter = checkpointDueAfterMs(saveMs, 0.1);
  expect(dueAfter).toBeCloseTo(1800);
  expect(saveMs / (saveMs + dueAfter)).toBeCloseTo(0.1);
});
