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
