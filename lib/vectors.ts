/**
 * Embedding vectors: L2 normalisation (the engine returns unit vectors, as OpenAI's embeddings and
 * sentence-transformers' are) and cosine similarity (the embedding benchmark and its tests).
 */

/** The vector scaled to length 1; a zero vector (or an empty one) is returned as it is, never NaN. */
export function l2Normalize(v: readonly number[]): number[] {
  let squares = 0;
  for (const x of v) squares += x * x;
  const norm = Math.sqrt(squares);
  return norm > 0 && Number.isFinite(norm) ? v.map((x) => x / norm) : [...v];
}

/** The cosine of the angle between two vectors of the same length (0 where either is zero). */
export function cosineSimilarity(a: readonly number[], b: readonly number[]): number {
  if (a.length !== b.length) throw new Error(`vectors of different lengths: ${a.length} and ${b.length}`);
  let dot = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return aa > 0 && bb > 0 ? dot / Math.sqrt(aa * bb) : 0;
}
