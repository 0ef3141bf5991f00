/**
 * Writes a LoRA adapter GGUF with seeded random weights for a LLaMA-architecture base, in the
 * layout llama.cpp's llama-adapter.cpp loads: `general.type = adapter`, `adapter.type = lora`,
 * `adapter.lora.alpha`, and for each adapted weight `<name>.lora_a` [in, rank] and
 * `<name>.lora_b` [rank, out] (GGUF dimension order, the base weight being [in, out]).
 * llama.cpp adds scale × alpha / rank × B·A·x to the base weight's product.
 */
import { open } from 'node:fs/promises';
import { z } from 'zod';
import { parseGgufMetadata } from '../../lib/gguf-metadata';
import { ggufHeader, layOut, type MetaValue, type TensorPlan, type WrittenModel, writeGgufFile } from './gguf-writer';

/** The base weights an adapter may target, as named in a block of the base. */
export const LORA_TARGETS = ['attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_gate', 'ffn_up', 'ffn_down'] as const;

export const loraSpecSchema = z.object({
  name: z.string().min(1).default('kiln-random-lora'),
  /** The base's shape: an adapter only loads onto a model whose weights it matches. */
  base: z.object({
    embedding: z.number().int().positive(),
    layers: z.number().int().positive(),
    heads: z.number().int().positive(),
    kvHeads: z.number().int().positive().optional(),
    feedForward: z.number().int().positive(),
  }),
  rank: z.number().int().positive().default(8),
  /** alpha / rank scales the update; alpha = rank applies it at full strength. */
  alpha: z.number().positive().optional(),
  targets: z
    .array(z.enum(LORA_TARGETS))
    .min(1)
    .default([...LORA_TARGETS]),
  seed: z.number().int().default(7),
});
export type LoraSpecInput = z.input<typeof loraSpecSchema>;

/** [in, out] of a block's weight, as the base writer lays it out. */
function baseDims(target: (typeof LORA_TARGETS)[number], base: z.output<typeof loraSpecSchema>['base']): [number, number] {
  const E = base.embedding;
  const kv = (E / base.heads) * (base.kvHeads ?? base.heads);
  const F = base.feedForward;
  const dims: Record<(typeof LORA_TARGETS)[number], [number, number]> = {
    attn_q: [E, E],
    attn_k: [E, kv],
    attn_v: [E, kv],
    attn_output: [E, E],
    ffn_gate: [E, F],
    ffn_up: [E, F],
    ffn_down: [F, E],
  };
  return dims[target];
}

export function planLoraTensors(spec: z.output<typeof loraSpecSchema>): TensorPlan[] {
  const list: Array<Omit<TensorPlan, 'bytes' | 'offset'>> = [];
  for (let l = 0; l < spec.base.layers; l++) {
    for (const target of spec.targets) {
      const [inDim, outDim] = baseDims(target, spec.base);
      const name = `blk.${l}.${target}.weight`;
      // B·A·x then has the magnitude of the base weight's own product: a clear change, not noise.
      list.push(
        { name: `${name}.lora_a`, dims: [inDim, spec.rank], type: 'F32', fill: 'random', scale: 1 / Math.sqrt(inDim) },
        { name: `${name}.lora_b`, dims: [spec.rank, outDim], type: 'F32', fill: 'random', scale: 1 / Math.sqrt(spec.rank) },
      );
    }
  }
  return layOut(list);
}

export async function writeLoraGguf(path: string, input: LoraSpecInput): Promise<WrittenModel> {
  const spec = loraSpecSchema.parse(input);
  const tensors = planLoraTensors(spec);
  const meta: Array<[string, MetaValue]> = [
    ['general.architecture', { str: 'llama' }],
    ['general.type', { str: 'adapter' }],
    ['general.name', { str: spec.name }],
    ['general.alignment', { u32: 32 }],
    ['adapter.type', { str: 'lora' }],
    ['adapter.lora.alpha', { f32: spec.alpha ?? spec.rank }],
  ];
  return writeGgufFile(path, ggufHeader(meta, tensors), tensors, spec.seed, 1);
}

/** The shape of a LLaMA-architecture GGUF on disk, for an adapter that fits it. */
export async function baseShapeOf(file: string): Promise<LoraSpecInput['base']> {
  const handle = await open(file, 'r');
  try {
    for (let bytes = 2 ** 20; ; bytes *= 4) {
      const buf = Buffer.alloc(bytes);
      const { bytesRead } = await handle.read(buf, 0, bytes, 0);
      const parsed = parseGgufMetadata(buf.subarray(0, bytesRead));
      if (parsed.kind === 'invalid') throw new Error(`${file}: not a GGUF file (${parsed.reason})`);
      if (parsed.kind === 'short') {
        if (bytesRead < bytes) throw new Error(`${file}: ends inside its header`);
        continue;
      }
      const m = parsed.metadata;
      const arch = String(m.get('general.architecture'));
      const num = (key: string) => {
        const v = m.get(`${arch}.${key}`);
        return v === undefined ? undefined : Number(v);
      };
      const shape = {
        embedding: num('embedding_length'),
        layers: num('block_count'),
        heads: num('attention.head_count'),
        kvHeads: num('attention.head_count_kv'),
        feedForward: num('feed_forward_length'),
      };
      if (!shape.embedding || !shape.layers || !shape.heads || !shape.feedForward) {
        throw new Error(`${file}: the metadata lacks ${arch}.embedding_length, block_count, attention.head_count or feed_forward_length`);
      }
      return shape as LoraSpecInput['base'];
    }
  } finally {
    await handle.close();
  }
}
