/** The chat agreement benchmark's scoring, and where two replies part. */
import { answerMatches, clip, firstDifference, partingStep, share } from '../../bench/chat-agreement/compare';

test('an expected answer matches as a whole word, case-insensitively, or as the whole reply', () => {
  expect(answerMatches('The capital of France is Paris.', { expected: ['Paris'], match: 'word' })).toBe(true);
  expect(answerMatches('Parisian food', { expected: ['Paris'], match: 'word' })).toBe(false);
  expect(answerMatches('2 + 2 = 4', { expected: ['4', 'four'], match: 'word' })).toBe(true);
  expect(answerMatches('14', { expected: ['4'], match: 'word' })).toBe(false);
  expect(answerMatches('Yes.', { expected: ['yes'], match: 'exact' })).toBe(true);
  expect(answerMatches('Yes, I can.', { expected: ['yes'], match: 'exact' })).toBe(false);
  expect(answerMatches('anything', {})).toBeUndefined();
});

test('two sequences part at their first difference, or where the shorter ends', () => {
  expect(firstDifference('abc', 'abc')).toBeUndefined();
  expect(firstDifference('abd', 'abc')).toBe(2);
  expect(firstDifference('ab', 'abc')).toBe(2);
  expect(firstDifference([1, 2], [2])).toBe(0);
});

test("the step where a reply leaves another's tokens", () => {
  expect(partingStep(['Yes', '.'], "I'm here")).toBe(0);
  expect(partingStep(['The', ' capital', ' is', ' Rome'], 'The capital of')).toBe(2);
  expect(partingStep(['The', ' end'], 'The end and more')).toBe(2);
});

test('cells and shares', () => {
  expect(clip('a\nb', 10)).toBe('a\\nb');
  expect(clip('abcdefghij', 5)).toBe('abcd…');
  expect(share(3, 4)).toBe('75.0 % (3/4)');
  expect(share(0, 0)).toBe('-');
});
