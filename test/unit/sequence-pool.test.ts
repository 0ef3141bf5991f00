/** Which idle sequence a generation is lent: prefix reuse, low-id packing, sessions. */
import type { Token } from 'node-llama-cpp';
import { cachedPromptTokens } from '../../engines/llama/prefix-reuse';
import { choose, MIN_REUSED_TOKENS } from '../../engines/llama/sequence-pool';

const idle = (...specs: Array<{ id: number; prefix: number; session?: string; releasedAt?: number }>) =>
  specs.map((s) => ({ releasedAt: 0, ...s }));
const pick = (seqs: ReturnType<typeof idle>, session?: string) => choose(seqs, (s) => s.prefix, session)?.id;

test('the longest shared prefix wins; none worth reusing gives the lowest id', () => {
  expect(pick(idle({ id: 0, prefix: 0 }, { id: 1, prefix: 300 }, { id: 2, prefix: 40 }))).toBe(1);
  expect(pick(idle({ id: 2, prefix: 0 }, { id: 1, prefix: MIN_REUSED_TOKENS - 1 }, { id: 3, prefix: 3 }))).toBe(1);
  expect(pick(idle({ id: 3, prefix: 5 }, { id: 2, prefix: 0 }))).toBe(2);
});

test('a session gets its own sequence, and others leave it alone while a free one is idle', () => {
  const seqs = idle({ id: 0, prefix: 500, session: 'a' }, { id: 1, prefix: 0 }, { id: 2, prefix: 900, session: 'b' });
  expect(pick(seqs, 'b')).toBe(2);
  expect(pick(seqs)).toBe(1);
  expect(pick(seqs, 'c')).toBe(1);
});

test("with only sessions' sequences idle, the best prefix goes, else the least recently used session's", () => {
  expect(pick(idle({ id: 0, prefix: 0, session: 'a', releasedAt: 9 }, { id: 1, prefix: 0, session: 'b', releasedAt: 3 }))).toBe(1);
  expect(pick(idle({ id: 0, prefix: 100, session: 'a', releasedAt: 9 }, { id: 1, prefix: 0, session: 'b', releasedAt: 3 }))).toBe(0);
});

test('cached tokens: the shared prefix, at most all but the last prompt token (it is decoded again)', () => {
  const cachedPromptTokensOf = (held: number[], evaluated: number[]) => cachedPromptTokens(held as Token[], evaluated as Token[]);
  expect(cachedPromptTokensOf([1, 2, 3, 9, 9], [1, 2, 3, 4])).toBe(3);
  expect(cachedPromptTokensOf([1, 2, 3, 4, 5], [1, 2, 3, 4])).toBe(3);
  expect(cachedPromptTokensOf([], [1, 2])).toBe(0);
  expect(cachedPromptTokensOf([7], [1, 2])).toBe(0);
});
