/**
 * What a KV snapshot of a prompt prefix costs with llama.cpp's own sequence state files
 * (node-llama-cpp's saveStateToFile / loadStateFromFile), before Kiln builds tiers on them: the
 * cold prefill it replaces, the save, the file (bytes per token), the restore into a fresh
 * context, a raw read of the same bytes as the restore's floor, and whether greedy decoding after
 * the restore gives the tokens it gives after a cold prefill. Then the object-storage tier through
 * Kiln's engine (./kv-object-tier.ts), on the shared MinIO. No API stack needed.
 */
import { mkdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { writeLlamaGguf } from '../tools/gguf/gguf-writer';
import { kvObjectTier } from './kv-object-tier';
import { DATA_DIR, ms, percentile, saveResult, table } from './lib';
import { directLlama, PREFIX_CACHE_MODEL } from './prefix-cache';

export interface KvSnapshotOptions {
  runs: number;
  prefixTokens: number[];
  threads: number;
  /** A GGUF to measure instead of the generated prefix-cache model (e.g. a trained one from the cache). */
  model?: string;
  /** Also measure the object-storage tier (needs the shared MinIO). */
  objectTier: boolean;
}

const GREEDY_TOKENS = 16;

export async function kvSnapshot(o: KvSnapshotOptions) {
  const dir = path.join(DATA_DIR, 'bench', 'kv-snapshot');
  await mkdir(dir, { recursive: true });
  let file = o.model;
  if (!file) {
    file = path.join(DATA_DIR, 'bench', 'models', 'prefix-cache.gguf');
    await mkdir(path.dirname(file), { recursive: true });
    await writeLlamaGguf(file, { ...PREFIX_CACHE_MODEL, name: 'kiln-prefix-cache' });
  }
  const llama = await directLlama(o.threads);
  const model = await llama.loadModel({ modelPath: file });
  const contextSize = Math.max(...o.prefixTokens) + GREEDY_TOKENS + 64;
  const context = await model.createContext({ sequences: 1, contextSize, threads: o.threads });
  const sequence = context.getSequence();
  /** A prompt of exactly `n` tokens, different for each run (the words do not change the cost). */
  const promptOf = (n: number, run: number) => {
    const words = Array.from({ length: n }, (_, i) => `w${(i * 7919 + run * 104729) % 5003}`).join(' ');
    return model.tokenize(words).slice(0, n);
  };
  const greedyAfter = async () => {
    const out: number[] = [];
    const iterator = sequence.evaluate([], { temperature: 0 });
    for await (const token of iterator) {
      out.push(token);
      if (out.length >= GREEDY_TOKENS) break;
    }
    return out;
  };

  const rows = [];
  const saved = [];
  for (const n of o.prefixTokens) {
    const r = { cold: [] as number[], save: [] as number[], restore: [] as number[], read: [] as number[], bytes: 0, equal: true };
    for (let run = 0; run < o.runs; run++) {
      const prompt = promptOf(n, run);
      const snapshot = path.join(dir, `prefix-${n}-${run}.kvstate`);
      await sequence.clearHistory();
      let t0 = performance.now();
      await sequence.evaluateWithoutGeneratingNewTokens(prompt);
      r.cold.push(performance.now() - t0);
      t0 = performance.now();
      r.bytes = (await sequence.saveStateToFile(snapshot)).fileSize;
      r.save.push(performance.now() - t0);
      const afterCold = await greedyAfter();

      await sequence.clearHistory();
      t0 = performance.now();
      await sequence.loadStateFromFile(snapshot, { acceptRisk: true });
      r.restore.push(performance.now() - t0);
      const afterRestore = await greedyAfter();
      r.equal &&= afterCold.length === afterRestore.length && afterCold.every((t, i) => t === afterRestore[i]);
      t0 = performance.now();
      await readFile(snapshot);
      r.read.push(performance.now() - t0);
      await rm(snapshot);
    }
    const med = (v: number[]) => percentile(v, 50);
    saved.push({ prefixTokens: n, ...r });
    rows.push({
      'prefix tokens': n,
      'cold prefill': ms(med(r.cold)),
      save: ms(med(r.save)),
      'file MiB': (r.bytes / 2 ** 20).toFixed(1),
      'bytes / token': Math.round(r.bytes / n),
      restore: ms(med(r.restore)),
      'raw read (page cache)': ms(med(r.read)),
      'cold ÷ restore': `${(med(r.cold) / med(r.restore)).toFixed(1)}×`,
      'greedy after restore = after prefill': r.equal ? 'yes' : 'NO',
    });
  }
  const promptText = (n: number, run: number) => model.detokenize(promptOf(n, run));
  await context.dispose();
  const object = o.objectTier
    ? await kvObjectTier({ file, dir, runs: o.runs, prefixTokens: Math.max(...o.prefixTokens), threads: o.threads, promptOf: promptText })
    : undefined;
  await model.dispose();
  await llama.dispose();
  table(
    `KV snapshot of a prefix, llama.cpp's sequence state file (${path.basename(file)}, ${o.threads} thread(s), medians of ${o.runs}; floor for the restore: ≥ 5× faster than a cold prefill)`,
    rows,
  );
  if (object) {
    table(
      `KV snapshots in object storage, through Kiln's engine and store (medians of ${o.runs}; S3 at ${process.env.S3_ENDPOINT ?? 'http://127.0.0.1:9000'})`,
      object.rows,
    );
  }
  console.log(`saved ${await saveResult('kv-snapshot', { model: file, threads: o.threads, runs: saved, objectTier: object?.raw })}`);
}
