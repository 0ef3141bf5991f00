/**
 * Memory a loaded GGUF model needs: its weights plus the KV cache of every sequence of its
 * context (f16 keys and values for each layer). Placement packs nodes by this figure.
 */
export interface LlamaShape {
  layers: number;
  embedding: number;
  heads: number;
  kvHeads?: number;
}

export function estimateLlamaMemoryBytes(fileSize: number, shape: LlamaShape, contextSize: number, sequences: number): number {
  const kvDim = (shape.embedding / shape.heads) * (shape.kvHeads ?? shape.heads);
  const kvCache = contextSize * sequences * shape.layers * 2 * kvDim * 2;
  // Compute buffers and bookkeeping: a tenth on top, measured loosely on CPU builds.
  return Math.ceil((fileSize + kvCache) * 1.1);
}

/** A positive whole number from GGUF metadata (u32 and u64 both occur), or undefined. */
const whole = (v: unknown): number | undefined => {
  const n = typeof v === 'bigint' ? Number(v) : v;
  return typeof n === 'number' && Number.isSafeInteger(n) && n > 0 ? n : undefined;
};

/**
 * The shape and trained context of a model from its GGUF metadata, keyed as in the file
 * (`general.architecture`, `<arch>.block_count`, …); undefined when a key placement needs is missing.
 */
export function llamaShapeOf(metadata: ReadonlyMap<string, unknown>): { shape: LlamaShape; trainContextSize?: number } | undefined {
  const arch = metadata.get('general.architecture');
  if (typeof arch !== 'string') return undefined;
  const layers = whole(metadata.get(`${arch}.block_count`));
  const embedding = whole(metadata.get(`${arch}.embedding_length`));
  const heads = whole(metadata.get(`${arch}.attention.head_count`));
  if (!layers || !embedding || !heads) return undefined;
  return {
    shape: { layers, embedding, heads, kvHeads: whole(metadata.get(`${arch}.attention.head_count_kv`)) },
    trainContextSize: whole(metadata.get(`${arch}.context_length`)),
  };
}
