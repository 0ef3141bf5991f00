/**
 * Writes LLaMA-architecture GGUF v3 files with seeded random weights.
 *
 * No real GGUF ships on npm, so Kiln makes its own for examples, tests and benchmarks:
 * inference speed depends on the shapes and the tensor type, not on the weight values.
 * The file is streamed to disk tensor by tensor, so a 2 GB model never sits in memory.
 */
import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import { z } from 'zod';

export const TENSOR_TYPES = ['F32', 'F16', 'Q8_0'] as const;
export type TensorType = (typeof TENSOR_TYPES)[number];

const GGML_TYPE_ID: Record<TensorType, number> = { F32: 0, F16: 1, Q8_0: 8 };
const Q8_0_BLOCK = 32;
const ALIGNMENT = 32;

export const llamaSpecSchema = z
  .object({
    name: z.string().min(1).default('kiln-random-llama'),
    embedding: z.number().int().positive().multipleOf(Q8_0_BLOCK).default(64),
    layers: z.number().int().positive().default(2),
    heads: z.number().int().positive().default(4),
    kvHeads: z.number().int().positive().optional(),
    feedForward: z.number().int().positive().multipleOf(Q8_0_BLOCK).default(128),
    contextLength: z.number().int().positive().default(2048),
    vocabWords: z.number().int().min(0).default(200),
    type: z.enum(TENSOR_TYPES).default('F32'),
    /**
     * What each block adds to the residual stream, relative to the default: well under 1, a
     * perturbation (as in the weights' quantization) stays small through the blocks instead of
     * growing, so a Q8_0 copy of the model picks the same tokens (a draft model for tests).
     */
    residualScale: z.number().positive().max(1).default(1),
    /**
     * How strongly each word points the output at one fixed next word (0: not at all). Random
     * weights give every token nearly the same logit; a trained model is sure of its next token
     * most of the time, and a draft agrees with it only where it is, so a target and a draft for
     * speculative decoding get this bigram structure (about 1 makes that word win by a wide margin
     * while the blocks add little, see residualScale).
     */
    bigram: z.number().min(0).default(0),
    seed: z.number().int().default(42),
    /** `tokenizer.chat_template`: a Jinja chat template stored in the file, as trained chat models carry one. */
    chatTemplate: z.string().min(1).optional(),
    /** `llama.pooling_type`, llama.cpp's pooling of an embedding model's token states: set, the file reads as an embedding model. */
    pooling: z.enum(['mean', 'cls', 'last']).optional(),
  })
  .refine((s) => s.embedding % s.heads === 0, { message: 'embedding must be divisible by heads', path: ['heads'] })
  .refine((s) => s.kvHeads === undefined || s.heads % s.kvHeads === 0, {
    message: 'heads must be divisible by kvHeads',
    path: ['kvHeads'],
  });
export type LlamaSpecInput = z.input<typeof llamaSpecSchema>;
export type LlamaSpec = z.output<typeof llamaSpecSchema>;

// Word pieces give the random model something readable to emit.
const WORDS = (
  'the of and to in is was for on that with as by at from his it an were are which be this has also ' +
  'had first one their its new after who they have her she two been other when there all during into ' +
  'school time may years more most only over city some world would where later up such used many can ' +
  'state about national out known university united then made could this these game film well high ' +
  'season three part them between team river house north south east west kiln fire clay glaze warm ' +
  'cold model fast slow light dark water stone wood iron gold silver green blue red white black small ' +
  'large old young long short good great little right left open close early late under around every ' +
  'again never always still here near far day night year week morning evening summer winter spring ' +
  'autumn road bridge tower garden field forest mountain valley island ocean sea lake storm wind rain ' +
  'snow sun moon star sky cloud bird horse dog cat fish tree flower leaf seed root bread salt sugar tea ' +
  'coffee music song story book letter word name voice hand eye heart mind dream'
).split(' ');

/** unk, bos, eos and the 256 byte tokens come before the first word piece. */
export const FIRST_WORD_TOKEN = 3 + 256;

export interface Vocabulary {
  tokens: string[];
  scores: number[];
  types: number[];
}

/** SentencePiece-style vocabulary: unk, bos, eos, 256 byte tokens, then `▁word` pieces. */
export function buildVocabulary(words: number): Vocabulary {
  const tokens = ['<unk>', '<s>', '</s>'];
  const types = [2, 3, 3];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    types.push(6);
  }
  const pieces = [...new Set(['▁', ...WORDS.map((w) => `▁${w}`)])];
  for (let i = 0; pieces.length < words; i++) pieces.push(`▁w${i}`);
  for (const piece of pieces.slice(0, words)) {
    tokens.push(piece);
    types.push(1);
  }
  const scores = tokens.map((_, i) => (types[i] === 1 ? -i : 0));
  return { tokens, scores, types };
}

export interface TensorPlan {
  name: string;
  dims: number[];
  type: TensorType;
  fill: 'ones' | 'random';
  /**
   * Rows [0, quietRows) are zero and the others four times louder: special and byte tokens
   * then rarely win, so the output reads as words.
   */
  quietRows?: number;
  /** Adds `weight` times `from`'s row `source[r]` to each row r that has one (the bigram structure). */
  rowsFrom?: { tensor: string; source: Map<number, number>; weight: number };
  /** Random values lie in ±scale; without it, ±1/√embedding (the file's default). */
  /** Times the tensor's random values (the residual scale of the blocks' output projections). */
  gain?: number;
  scale?: number;
  bytes: number;
  offset: number;
}

function tensorBytes(dims: number[], type: TensorType): number {
  const count = dims.reduce((a, b) => a * b, 1);
  if (type === 'F32') return count * 4;
  if (type === 'F16') return count * 2;
  return (count / Q8_0_BLOCK) * (2 + Q8_0_BLOCK);
}

const align = (n: number): number => Math.ceil(n / ALIGNMENT) * ALIGNMENT;

export function planTensors(spec: LlamaSpec, vocabSize: number): TensorPlan[] {
  const E = spec.embedding;
  const kv = (E / spec.heads) * (spec.kvHeads ?? spec.heads);
  const F = spec.feedForward;
  const list: Array<Omit<TensorPlan, 'bytes' | 'offset'>> = [
    { name: 'token_embd.weight', dims: [E, vocabSize], type: spec.type, fill: 'random' },
    { name: 'output_norm.weight', dims: [E], type: 'F32', fill: 'ones' },
    {
      name: 'output.weight',
      dims: [E, vocabSize],
      type: spec.type,
      fill: 'random',
      quietRows: FIRST_WORD_TOKEN,
      ...bigramRows(spec, vocabSize),
    },
  ];
  for (let l = 0; l < spec.layers; l++) {
    const p = `blk.${l}.`;
    list.push(
      { name: `${p}attn_norm.weight`, dims: [E], type: 'F32', fill: 'ones' },
      { name: `${p}ffn_norm.weight`, dims: [E], type: 'F32', fill: 'ones' },
      { name: `${p}attn_q.weight`, dims: [E, E], type: spec.type, fill: 'random' },
      { name: `${p}attn_k.weight`, dims: [E, kv], type: spec.type, fill: 'random' },
      { name: `${p}attn_v.weight`, dims: [E, kv], type: spec.type, fill: 'random' },
      { name: `${p}attn_output.weight`, dims: [E, E], type: spec.type, fill: 'random', gain: spec.residualScale },
      { name: `${p}ffn_gate.weight`, dims: [E, F], type: spec.type, fill: 'random' },
      { name: `${p}ffn_up.weight`, dims: [E, F], type: spec.type, fill: 'random' },
      { name: `${p}ffn_down.weight`, dims: [F, E], type: spec.type, fill: 'random', gain: spec.residualScale },
    );
  }
  return layOut(list);
}

/**
 * Output row r gets the embedding of the word before it in a seeded cycle through the words: the
 * state after reading a word is then close to the output row of its successor.
 */
function bigramRows(spec: LlamaSpec, vocabSize: number): Pick<TensorPlan, 'rowsFrom'> {
  if (spec.bigram === 0) return {};
  const words = Array.from({ length: vocabSize - FIRST_WORD_TOKEN }, (_, i) => FIRST_WORD_TOKEN + i);
  const next = rng(seedFor(spec.seed, 'bigram'));
  for (let i = words.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [words[i], words[j]] = [words[j], words[i]];
  }
  const source = new Map(words.map((w, i) => [words[(i + 1) % words.length], w]));
  return { rowsFrom: { tensor: 'token_embd.weight', source, weight: spec.bigram } };
}

/** Offsets in the data section, each tensor aligned. */
export function layOut(list: Array<Omit<TensorPlan, 'bytes' | 'offset'>>): TensorPlan[] {
  let offset = 0;
  return list.map((t) => {
    const bytes = tensorBytes(t.dims, t.type);
    const plan = { ...t, bytes, offset };
    offset = align(offset + bytes);
    return plan;
  });
}

/** Little-endian byte builder for the header. */
class ByteWriter {
  private chunks: Buffer[] = [];
  length = 0;
  private push(b: Buffer) {
    this.chunks.push(b);
    this.length += b.length;
  }
  u32(v: number) {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.push(b);
  }
  i32(v: number) {
    const b = Buffer.alloc(4);
    b.writeInt32LE(v);
    this.push(b);
  }
  u64(v: number) {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.push(b);
  }
  f32(v: number) {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    this.push(b);
  }
  str(s: string) {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.push(b);
  }
  pad() {
    const rest = align(this.length) - this.length;
    if (rest) this.push(Buffer.alloc(rest));
  }
  toBuffer() {
    return Buffer.concat(this.chunks);
  }
}

const GGUF_VALUE = { UINT32: 4, INT32: 5, FLOAT32: 6, STRING: 8, ARRAY: 9 } as const;

export type MetaValue =
  | { u32: number }
  | { f32: number }
  | { str: string }
  | { strings: string[] }
  | { f32s: number[] }
  | { i32s: number[] };

function writeMeta(w: ByteWriter, key: string, value: MetaValue) {
  w.str(key);
  if ('u32' in value) {
    w.u32(GGUF_VALUE.UINT32);
    w.u32(value.u32);
  } else if ('f32' in value) {
    w.u32(GGUF_VALUE.FLOAT32);
    w.f32(value.f32);
  } else if ('str' in value) {
    w.u32(GGUF_VALUE.STRING);
    w.str(value.str);
  } else {
    w.u32(GGUF_VALUE.ARRAY);
    if ('strings' in value) {
      w.u32(GGUF_VALUE.STRING);
      w.u64(value.strings.length);
      value.strings.forEach((s) => w.str(s));
    } else if ('f32s' in value) {
      w.u32(GGUF_VALUE.FLOAT32);
      w.u64(value.f32s.length);
      value.f32s.forEach((v) => w.f32(v));
    } else {
      w.u32(GGUF_VALUE.INT32);
      w.u64(value.i32s.length);
      value.i32s.forEach((v) => w.i32(v));
    }
  }
}

/** llama.cpp's `enum llama_pooling_type`. */
const POOLING_TYPE = { mean: 1, cls: 2, last: 3 } as const;

function buildHeader(spec: LlamaSpec, vocab: Vocabulary, tensors: TensorPlan[]): Buffer {
  return ggufHeader(llamaMetadata(spec, vocab), tensors);
}

function llamaMetadata(spec: LlamaSpec, vocab: Vocabulary): Array<[string, MetaValue]> {
  return [
    ['general.architecture', { str: 'llama' }],
    ['general.name', { str: spec.name }],
    ['general.alignment', { u32: ALIGNMENT }],
    ['llama.context_length', { u32: spec.contextLength }],
    ['llama.embedding_length', { u32: spec.embedding }],
    ['llama.block_count', { u32: spec.layers }],
    ['llama.feed_forward_length', { u32: spec.feedForward }],
    ['llama.attention.head_count', { u32: spec.heads }],
    ['llama.attention.head_count_kv', { u32: spec.kvHeads ?? spec.heads }],
    ['llama.attention.layer_norm_rms_epsilon', { f32: 1e-5 }],
    ['llama.rope.dimension_count', { u32: spec.embedding / spec.heads }],
    ['tokenizer.ggml.model', { str: 'llama' }],
    ['tokenizer.ggml.tokens', { strings: vocab.tokens }],
    ['tokenizer.ggml.scores', { f32s: vocab.scores }],
    ['tokenizer.ggml.token_type', { i32s: vocab.types }],
    ['tokenizer.ggml.unknown_token_id', { u32: 0 }],
    ['tokenizer.ggml.bos_token_id', { u32: 1 }],
    ['tokenizer.ggml.eos_token_id', { u32: 2 }],
    ...(spec.chatTemplate ? [['tokenizer.chat_template', { str: spec.chatTemplate }] as [string, MetaValue]] : []),
    ...(spec.pooling ? [['llama.pooling_type', { u32: POOLING_TYPE[spec.pooling] }] as [string, MetaValue]] : []),
  ];
}

/** The header of a GGUF v3 file: magic, counts, metadata, tensor infos, padded to the alignment. */
export function ggufHeader(meta: Array<[string, MetaValue]>, tensors: TensorPlan[]): Buffer {
  const w = new ByteWriter();
  w.u32(0x46554747); // "GGUF"
  w.u32(3);
  w.u64(tensors.length);
  w.u64(meta.length);
  for (const [k, v] of meta) writeMeta(w, k, v);
  for (const t of tensors) {
    w.str(t.name);
    w.u32(t.dims.length);
    t.dims.forEach((d) => w.u64(d));
    w.u32(GGML_TYPE_ID[t.type]);
    w.u64(t.offset);
  }
  w.pad();
  return w.toBuffer();
}

/** mulberry32: small, fast and good enough for weights whose values do not matter. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function seedFor(seed: number, name: string): number {
  return createHash('sha256').update(`${seed}:${name}`).digest().readUInt32LE(0);
}

const f32buf = new Float32Array(1);
const u32view = new Uint32Array(f32buf.buffer);
export function toHalf(value: number): number {
  f32buf[0] = value;
  const x = u32view[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = ((x >>> 23) & 0xff) - 127 + 15;
  const mant = x & 0x7fffff;
  if (exp <= 0) {
    if (exp < -10) return sign;
    return sign | ((mant | 0x800000) >> (1 - exp + 13));
  }
  if (exp >= 31) return sign | 0x7c00;
  return sign | (exp << 10) | (mant >> 13);
}

const CHUNK_ELEMENTS = 1 << 20; // a multiple of the Q8_0 block

/** The tensor's values, as written before conversion to its type, in chunks of at most CHUNK_ELEMENTS. */
function* tensorValues(t: TensorPlan, seed: number, scale: number): Generator<Float32Array> {
  const count = t.dims.reduce((a, b) => a * b, 1);
  const next = rng(seedFor(seed, t.name));
  for (let start = 0; start < count; start += CHUNK_ELEMENTS) {
    const n = Math.min(CHUNK_ELEMENTS, count - start);
    const values = new Float32Array(n);
    const quietEnd = (t.quietRows ?? 0) * t.dims[0];
    if (t.fill === 'ones') values.fill(1);
    else {
      const base = t.scale ?? scale;
      const loud = (t.quietRows ? 4 * base : base) * (t.gain ?? 1);
      for (let i = 0; i < n; i++) values[i] = start + i < quietEnd ? 0 : (next() * 2 - 1) * loud;
    }
    yield values;
  }
}

function wholeTensor(t: TensorPlan, seed: number, scale: number): Float32Array {
  const whole = new Float32Array(t.dims.reduce((a, b) => a * b, 1));
  let at = 0;
  for (const chunk of tensorValues(t, seed, scale)) {
    whole.set(chunk, at);
    at += chunk.length;
  }
  return whole;
}

/** Yields the tensor's bytes in chunks of at most CHUNK_ELEMENTS values. */
function* tensorData(t: TensorPlan, seed: number, scale: number, all: TensorPlan[]): Generator<Buffer> {
  const rowsFrom = t.rowsFrom;
  // The source tensor is regenerated whole (its values are seeded by its name): vocabulary × embedding floats.
  const source = rowsFrom && wholeTensor(all.find((x) => x.name === rowsFrom.tensor)!, seed, scale);
  let start = 0;
  for (const values of tensorValues(t, seed, scale)) {
    const n = values.length;
    if (rowsFrom && source) {
      const width = t.dims[0];
      for (let i = 0; i < n; i++) {
        const from = rowsFrom.source.get(Math.floor((start + i) / width));
        if (from !== undefined) values[i] += rowsFrom.weight * source[from * width + ((start + i) % width)];
      }
    }
    start += n;
    if (t.type === 'F32') yield Buffer.from(values.buffer);
    else if (t.type === 'F16') {
      const out = Buffer.alloc(n * 2);
      for (let i = 0; i < n; i++) out.writeUInt16LE(toHalf(values[i]), i * 2);
      yield out;
    } else {
      const blocks = n / Q8_0_BLOCK;
      const out = Buffer.alloc(blocks * (2 + Q8_0_BLOCK));
      for (let b = 0; b < blocks; b++) {
        let max = 0;
        for (let i = 0; i < Q8_0_BLOCK; i++) max = Math.max(max, Math.abs(values[b * Q8_0_BLOCK + i]));
        const d = max / 127;
        const o = b * (2 + Q8_0_BLOCK);
        out.writeUInt16LE(toHalf(d), o);
        for (let i = 0; i < Q8_0_BLOCK; i++) {
          out.writeInt8(d === 0 ? 0 : Math.round(values[b * Q8_0_BLOCK + i] / d), o + 2 + i);
        }
      }
      yield out;
    }
  }
}

export interface WrittenModel {
  path: string;
  size: number;
  sha256: string;
  parameters: number;
}

/** Size in bytes that `writeLlamaGguf` would write for this spec. */
export function ggufSize(input: LlamaSpecInput): number {
  const spec = llamaSpecSchema.parse(input);
  const vocab = buildVocabulary(spec.vocabWords);
  const tensors = planTensors(spec, vocab.tokens.length);
  const last = tensors[tensors.length - 1];
  return buildHeader(spec, vocab, tensors).length + last.offset + last.bytes;
}

export async function writeLlamaGguf(path: string, input: LlamaSpecInput): Promise<WrittenModel> {
  const spec = llamaSpecSchema.parse(input);
  const vocab = buildVocabulary(spec.vocabWords);
  const tensors = planTensors(spec, vocab.tokens.length);
  return writeGgufFile(path, buildHeader(spec, vocab, tensors), tensors, spec.seed, 1 / Math.sqrt(spec.embedding));
}

/** Streams the header, then each tensor's seeded values at its offset; `scale` is the default range of random values. */
export async function writeGgufFile(
  path: string,
  header: Buffer,
  tensors: TensorPlan[],
  seed: number,
  scale: number,
): Promise<WrittenModel> {
  const hash = createHash('sha256');
  const file = await open(path, 'w');
  let size = 0;
  const write = async (b: Buffer) => {
    hash.update(b);
    await file.write(b);
    size += b.length;
  };
  try {
    await write(header);
    const dataStart = size;
    for (const t of tensors) {
      if (size - dataStart < t.offset) await write(Buffer.alloc(t.offset - (size - dataStart)));
      for (const chunk of tensorData(t, seed, scale, tensors)) await write(chunk);
    }
  } finally {
    await file.close();
  }
  const parameters = tensors.reduce((sum, t) => sum + t.dims.reduce((a, b) => a * b, 1), 0);
  return { path, size, sha256: hash.digest('hex'), parameters };
}
