/** The API's own reader of GGUF headers: the figures placement packs by, from untrusted bytes. */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { llamaShapeOf } from '../../domain/llama-memory';
import { parseGgufMetadata } from '../../lib/gguf-metadata';
import { writeLlamaGguf } from '../../tools/gguf/gguf-writer';

let dir: string;
let bytes: Buffer;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-gguf-meta-'));
  const file = path.join(dir, 'm.gguf');
  await writeLlamaGguf(file, {
    embedding: 64,
    layers: 3,
    heads: 4,
    kvHeads: 2,
    feedForward: 96,
    contextLength: 1536,
    vocabWords: 50,
    seed: 3,
  });
  bytes = await readFile(file);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

test('reads the shape and trained context that node-llama-cpp reads, walking past the vocabulary', async () => {
  const parsed = parseGgufMetadata(bytes);
  if (parsed.kind !== 'metadata') throw new Error(`parsed as ${parsed.kind}`);
  expect(llamaShapeOf(parsed.metadata)).toEqual({ shape: { layers: 3, embedding: 64, heads: 4, kvHeads: 2 }, trainContextSize: 1536 });
  const { readGgufFileInfo } = await import('node-llama-cpp');
  const info = await readGgufFileInfo(path.join(dir, 'm.gguf'), { readTensorInfo: false, logWarnings: false });
  expect(info.architectureMetadata).toMatchObject({
    block_count: 3,
    embedding_length: 64,
    context_length: 1536,
    attention: { head_count: 4, head_count_kv: 2 },
  });
  // node-llama-cpp is a large module: loading it into jest's sandbox alone can pass 5 s on a busy box.
}, 60_000);

test('a prefix that ends inside the header asks for more bytes, never guesses', () => {
  for (const n of [0, 3, 10, 24, 100, 2000]) expect(parseGgufMetadata(bytes.subarray(0, n)).kind).toBe('short');
});

test('other files and absurd lengths are invalid, without allocating what they claim', () => {
  expect(parseGgufMetadata(Buffer.from('not a gguf file at all'))).toEqual({ kind: 'invalid', reason: 'not a GGUF file (no GGUF magic)' });
  const huge = Buffer.alloc(40);
  huge.write('GGUF', 0);
  huge.writeUInt32LE(3, 4);
  huge.writeBigUInt64LE(0n, 8);
  huge.writeBigUInt64LE(1n, 16);
  huge.writeBigUInt64LE(2n ** 62n, 24); // the first key's length
  expect(parseGgufMetadata(huge).kind).toBe('invalid');
  const badType = Buffer.concat([
    bytes.subarray(0, 24),
    Buffer.from([1, 0, 0, 0, 0, 0, 0, 0]),
    Buffer.from('k'),
    Buffer.from([99, 0, 0, 0, 0]),
  ]);
  expect(parseGgufMetadata(badType)).toEqual({ kind: 'invalid', reason: 'unknown value type 99' });
});

test("the tokenizer's arrays are kept as digests: the same vocabulary in another tensor type matches, another vocabulary does not", async () => {
  const digests = async (spec: Parameters<typeof writeLlamaGguf>[1]) => {
    const file = path.join(dir, 'vocab.gguf');
    await writeLlamaGguf(file, { embedding: 64, layers: 1, heads: 4, feedForward: 96, seed: 5, ...spec });
    const parsed = parseGgufMetadata(await readFile(file));
    if (parsed.kind !== 'metadata') throw new Error(`parsed as ${parsed.kind}`);
    return parsed.metadata.get('tokenizer.ggml.tokens.sha256');
  };
  const f32 = await digests({ type: 'F32', vocabWords: 50 });
  expect(f32).toMatch(/^[a-f0-9]{64}$/);
  expect(await digests({ type: 'Q8_0', vocabWords: 50, seed: 9 })).toBe(f32);
  expect(await digests({ type: 'F32', vocabWords: 51 })).not.toBe(f32);
});
