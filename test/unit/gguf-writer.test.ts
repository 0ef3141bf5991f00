import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { validateGguf } from '../../engines/llama/engine';
import {
  buildVocabulary,
  FIRST_WORD_TOKEN,
  ggufSize,
  llamaSpecSchema,
  planTensors,
  TENSOR_TYPES,
  toHalf,
  writeLlamaGguf,
} from '../../tools/gguf/gguf-writer';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-gguf-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const spec = { embedding: 64, layers: 2, heads: 4, kvHeads: 2, feedForward: 96, contextLength: 1024, vocabWords: 50 };

describe('writeLlamaGguf', () => {
  test.each(TENSOR_TYPES)('%s round-trips through node-llama-cpp readGgufFileInfo', async (type) => {
    const { readGgufFileInfo } = await import('node-llama-cpp');
    const file = path.join(dir, `m-${type}.gguf`);
    const written = await writeLlamaGguf(file, { ...spec, type, seed: 7 });
    expect((await stat(file)).size).toBe(written.size);
    expect(ggufSize({ ...spec, type, seed: 7 })).toBe(written.size);

    const info = await readGgufFileInfo(file, { readTensorInfo: true });
    expect(info.version).toBe(3);
    const meta = info.metadata as any;
    expect(meta.general.architecture).toBe('llama');
    expect(meta.llama.embedding_length).toBe(64);
    expect(meta.llama.block_count).toBe(2);
    expect(meta.llama.feed_forward_length).toBe(96);
    expect(meta.llama.attention.head_count).toBe(4);
    expect(meta.llama.attention.head_count_kv).toBe(2);
    expect(meta.tokenizer.ggml.tokens).toHaveLength(3 + 256 + 50);
    expect(info.tensorCount).toBe(3 + 2 * 9);
    const byName = new Map(info.fullTensorInfo!.map((t) => [t.name, t]));
    expect(byName.get('blk.1.attn_k.weight')!.dimensions.map(Number)).toEqual([64, 32]);
    expect(byName.get('blk.0.ffn_down.weight')!.dimensions.map(Number)).toEqual([96, 64]);
    const ggmlType = { F32: 0, F16: 1, Q8_0: 8 }[type];
    expect(byName.get('token_embd.weight')!.ggmlType).toBe(ggmlType);
    expect(byName.get('output_norm.weight')!.ggmlType).toBe(0);
  });

  test('the same seed writes the same bytes and another seed other bytes', async () => {
    const a = await writeLlamaGguf(path.join(dir, 'a.gguf'), { ...spec, seed: 1 });
    const b = await writeLlamaGguf(path.join(dir, 'b.gguf'), { ...spec, seed: 1 });
    const c = await writeLlamaGguf(path.join(dir, 'c.gguf'), { ...spec, seed: 2 });
    expect(a.sha256).toBe(b.sha256);
    expect(c.sha256).not.toBe(a.sha256);
    expect(c.size).toBe(a.size);
  });

  test('the bigram structure changes the output weights only, and bigram 0 the bytes not at all', async () => {
    const plain = await writeLlamaGguf(path.join(dir, 'plain.gguf'), { ...spec, seed: 1 });
    const zero = await writeLlamaGguf(path.join(dir, 'zero.gguf'), { ...spec, seed: 1, bigram: 0 });
    const bigram = await writeLlamaGguf(path.join(dir, 'bigram.gguf'), { ...spec, seed: 1, bigram: 1 });
    expect(zero.sha256).toBe(plain.sha256);
    expect(bigram.size).toBe(plain.size);
    const [a, b] = [await readFile(plain.path), await readFile(bigram.path)];
    const tensors = planTensors(llamaSpecSchema.parse({ ...spec, seed: 1 }), buildVocabulary(spec.vocabWords).tokens.length);
    const last = tensors[tensors.length - 1];
    const output = tensors.find((t) => t.name === 'output.weight')!;
    const from = plain.size - (last.offset + last.bytes) + output.offset;
    const differ = [...a.keys()].filter((i) => a[i] !== b[i]);
    // The word rows (F32), not the zero rows of special and byte tokens.
    expect(differ.length).toBeGreaterThan(((output.dims[1] - FIRST_WORD_TOKEN) * output.dims[0] * 4) / 2);
    expect(differ.every((i) => i >= from && i < from + output.bytes)).toBe(true);
  });

  test('rejects shapes llama.cpp cannot use', async () => {
    await expect(writeLlamaGguf(path.join(dir, 'x.gguf'), { ...spec, embedding: 60 })).rejects.toThrow(/embedding/);
    await expect(writeLlamaGguf(path.join(dir, 'x.gguf'), { ...spec, heads: 3 })).rejects.toThrow(/heads/);
  });
});

describe('validateGguf', () => {
  test('a generated model passes', async () => {
    const file = path.join(dir, 'ok.gguf');
    await writeLlamaGguf(file, spec);
    await expect(validateGguf(file)).resolves.toMatchObject({ architecture: 'llama', trainContextSize: 1024 });
  });

  test('garbage is a typed ModelFileCorrupt failure, not a crash', async () => {
    const file = path.join(dir, 'garbage.gguf');
    await writeFile(file, Buffer.from('GGUF not really a model'));
    await expect(validateGguf(file)).rejects.toMatchObject({ name: 'EngineError', type: 'ModelFileCorrupt' });
  });

  test('a file without the keys llama.cpp asserts on is refused before loading', async () => {
    const file = path.join(dir, 'nofeed.gguf');
    await writeLlamaGguf(file, spec);
    const bytes = await readFile(file);
    // Rename the key in place (same length), as a broken converter might.
    const at = bytes.indexOf('llama.feed_forward_length');
    bytes.write('llama.feed_forward_lengtX', at);
    await writeFile(file, bytes);
    await expect(validateGguf(file)).rejects.toMatchObject({
      type: 'ModelFileCorrupt',
      message: expect.stringContaining('llama.feed_forward_length'),
    });
  });
});

describe('vocabulary and half floats', () => {
  test('tokens are unique, with byte tokens in upper-case hex', () => {
    const v = buildVocabulary(300);
    expect(new Set(v.tokens).size).toBe(v.tokens.length);
    expect(v.tokens[3 + 0xab]).toBe('<0xAB>');
    expect(v.types.filter((t) => t === 6)).toHaveLength(256);
  });

  test('toHalf encodes exactly representable values', () => {
    expect(toHalf(0)).toBe(0);
    expect(toHalf(1)).toBe(0x3c00);
    expect(toHalf(-2)).toBe(0xc000);
    expect(toHalf(0.5)).toBe(0x3800);
    expect(toHalf(65504)).toBe(0x7bff);
    expect(toHalf(1e6)).toBe(0x7c00);
  });
});
