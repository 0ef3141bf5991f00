/** Embedding vectors: unit length as OpenAI returns them, cosine similarity, and the benchmark's ROC AUC. */
import { rocAuc } from '../../bench/lib';
import { cosineSimilarity, l2Normalize } from '../../lib/vectors';

test('a vector is scaled to length 1 and keeps its direction', () => {
  expect(l2Normalize([3, 4])).toEqual([0.6, 0.8]);
  const v = l2Normalize([0.5, -2, 7, 1e-3]);
  expect(Math.hypot(...v)).toBeCloseTo(1, 12);
  expect(cosineSimilarity(v, [0.5, -2, 7, 1e-3])).toBeCloseTo(1, 12);
  expect(l2Normalize([-2])).toEqual([-1]);
});

test('a zero or empty vector stays as it is, never NaN', () => {
  expect(l2Normalize([0, 0, 0])).toEqual([0, 0, 0]);
  expect(l2Normalize([])).toEqual([]);
});

test('cosine similarity: same direction 1, opposite −1, orthogonal 0, any length', () => {
  expect(cosineSimilarity([1, 2, 3], [2, 4, 6])).toBeCloseTo(1, 12);
  expect(cosineSimilarity([1, 2, 3], [-1, -2, -3])).toBeCloseTo(-1, 12);
  expect(cosineSimilarity([1, 0], [0, 5])).toBe(0);
  expect(cosineSimilarity([0, 0], [1, 1])).toBe(0);
  expect(() => cosineSimilarity([1], [1, 2])).toThrow('different lengths');
});

test('ROC AUC: the chance a positive outscores a negative, ties counting half', () => {
  expect(rocAuc([0.9, 0.8, 0.1, 0.2], [true, true, false, false])).toBe(1);
  expect(rocAuc([0.1, 0.2, 0.9, 0.8], [true, true, false, false])).toBe(0);
  expect(rocAuc([0.5, 0.5], [true, false])).toBe(0.5);
  // Positives 0.8, 0.4; negatives 0.6, 0.2: 0.8 beats both, 0.4 beats one of two → 3 of 4.
  expect(rocAuc([0.8, 0.6, 0.4, 0.2], [true, false, true, false])).toBe(0.75);
  expect(rocAuc([0.3, 0.7], [true, true])).toBeNaN();
  expect(() => rocAuc([1], [true, false])).toThrow();
});
