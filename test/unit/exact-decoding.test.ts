/** The pure parts of exact decoding: chunk seeds, which requests are repeatable, and a generation's key. */
import { textGenerationInput } from '../../domain/tasks/text-generation';
import { chunkSeed, generationKey, isRepeatable } from '../../engines/llama/exact-decoding';

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
