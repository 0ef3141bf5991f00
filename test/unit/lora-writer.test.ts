import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { writeLlamaGguf } from '../../tools/gguf/gguf-writer';
import { baseShapeOf, writeLoraGguf } from '../../tools/gguf/lora-writer';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-lora-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const spec = { embedding: 64, layers: 2, heads: 4, kvHeads: 2, feedForward: 96, contextLength: 1024, vocabWords: 50, seed: 3 };

describe('writeLoraGguf', () => {
  test('writes the metadata and tensor shapes llama.cpp expects of a LoRA adapter for the base', async () => {
    const { readGgufFileInfo } = await import('node-llama-cpp');
    const base = path.join(dir, 'base.gguf');
    await writeLlamaGguf(base, spec);
    const shape = await baseShapeOf(base);
    expect(shape).toEqual({ embedding: 64, layers: 2, heads: 4, kvHeads: 2, feedForward: 96 });
    const file = path.join(dir, 'lora.gguf');
    await writeLoraGguf(file, { base: shape, rank: 4, alpha: 8 });

    const info = await readGgufFileInfo(file, { readTensorInfo: true });
    const meta = info.metadata as any;
    expect(meta.general).toMatchObject({ architecture: 'llama', type: 'adapter' });
    expect(meta.adapter.type).toBe('lora');
    expect(meta.adapter.lora.alpha).toBe(8);
    // Seven weights per block, an A and a B for each.
    expect(info.tensorCount).toBe(2 * 7 * 2);
    const dims = new Map(info.fullTensorInfo!.map((t) => [t.name, t.dimensions.map(Number)]));
    // The base's attn_k is [64, 32] (grouped-query: 2 of 4 heads): A is [in, rank], B [rank, out].
    expect(dims.get('blk.1.attn_k.weight.lora_a')).toEqual([64, 4]);
    expect(dims.get('blk.1.attn_k.weight.lora_b')).toEqual([4, 32]);
    expect(dims.get('blk.0.ffn_down.weight.lora_a')).toEqual([96, 4]);
    expect(dims.get('blk.0.ffn_down.weight.lora_b')).toEqual([4, 64]);
  });

  test('llama.cpp applies it to the base: greedy output changes, and the base is unchanged without it', async () => {
    const { getLlama, LlamaCompletion } = await import('node-llama-cpp');
    const base = path.join(dir, 'gen-base.gguf');
    const lora = path.join(dir, 'gen-lora.gguf');
    await writeLlamaGguf(base, { ...spec, vocabWords: 200 });
    await writeLoraGguf(lora, { base: await baseShapeOf(base), seed: 11 });
    // One thread: llama.cpp's spinning workers crawl on a busy two-core machine.
    const llama = await getLlama({ gpu: false, build: 'never', skipDownload: true, usePrebuiltBinaries: true, progressLogs: false });
    const model = await llama.loadModel({ modelPath: base });
    const complete = async (adapter?: string) => {
      const context = await model.createContext({
        contextSize: 256,
        threads: 1,
        lora: adapter ? { adapters: [{ filePath: adapter }] } : undefined,
      });
      try {
        return await new LlamaCompletion({ contextSequence: context.getSequence() }).generateCompletion('The kiln was', {
          maxTokens: 12,
          temperature: 0,
        });
      } finally {
        await context.dispose();
      }
    };
    const plain = await complete();
    const adapted = await complete(lora);
    expect(adapted).not.toBe(plain);
    expect(await complete(lora)).toBe(adapted);
    expect(await complete()).toBe(plain);
    await model.dispose();
    await llama.dispose();
  }, 60_000);

  test('refuses a base file that is not GGUF', async () => {
    const { writeFile } = await import('node:fs/promises');
    const bad = path.join(dir, 'bad.gguf');
    await writeFile(bad, 'not a model at all, just text');
    await expect(baseShapeOf(bad)).rejects.toThrow(/not a GGUF file/);
  });
});
