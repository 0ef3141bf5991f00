/**
 * The object-storage tier of KV snapshots through Kiln's own engine and store: a node evaluates a
 * prefix cold and uploads its snapshot; a second node, on an empty disk, gets the same prompt and
 * restores the prefix from object storage. Two rows against their floors: that node's time to
 * first token ÷ the cold one's (≥ 5× faster), and its restore ÷ (a raw GET of the snapshot's bytes
 * + llama.cpp's own state load of them) (≤ 1.3×), each GET the first read of an object put just
 * before. Uses the shared MinIO (S3_* settings, as infra/env.sh exports them), under a prefix of
 * its own that it removes; no API stack.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { textGenerationInput } from '../domain/tasks/text-generation';
import { LlamaEngine } from '../engines/llama/engine';
import { KvObjectTier } from '../engines/llama/kv-object-tier';
import { KvSnapshotStore } from '../engines/llama/kv-snapshots';
import { config } from '../lib/config';
import { newId } from '../lib/ids';
import { Storage } from '../lib/storage';
import { ms, percentile } from './lib';

export interface KvObjectTierOptions {
  file: string;
  dir: string;
  runs: number;
  prefixTokens: number;
  threads: number;
  /** A prompt of exactly `n` tokens, different for each run. */
  promptOf: (n: number, run: number) => string;
}

const MIN_TOKENS = 512;

export interface KvObjectTierRow {
  cold: number[];
  objectTtft: number[];
  restore: number[];
  floor: number[];
  /** A raw GET of a first read since the put, on the plain socket the restore reads through: the floor's. */
  get: number[];
  /** The same through the SDK's stream (printed beside the floor, not in it). */
  sdkGet: number[];
  load: number[];
  /** The same node's restore again, from its disk tier, after it unloaded and loaded the model. */
  disk: number[];
  bytes: number;
  tiers: string[];
}

export async function kvObjectTier(
  o: KvObjectTierOptions,
): Promise<{ rows: Array<Record<string, string | number>>; raw: KvObjectTierRow }> {
  const storage = Storage.fromConfig(config());
  await storage.ensureBucket();
  const prefix = `kv-bench/${newId()}/`;
  const objects = new KvObjectTier(storage, { budgetBytes: 2 ** 40, minTokens: MIN_TOKENS, prefix });
  const nodes = await Promise.all(
    ['seen', 'never-seen'].map(async (name) => {
      const snapshots = await mkdtemp(path.join(o.dir, `${name}-`));
      const store = new KvSnapshotStore({ dir: snapshots, budgetBytes: 2 ** 40, minTokens: MIN_TOKENS, objects });
      const engine = new LlamaEngine({
        gpu: 'auto',
        contextSize: o.prefixTokens + 256,
        sequences: 1,
        threads: o.threads,
        snapshots: store,
      });
      await engine.load('bench', o.file);
      return { engine, store, snapshots };
    }),
  );
  const [seen, fresh] = nodes;
  // The floor's own context: llama.cpp loading the same bytes, with nothing of Kiln around it.
  const model = await (await fresh.engine.backend()).loadModel({ modelPath: o.file });
  const context = await model.createContext({ sequences: 1, contextSize: o.prefixTokens + 256, threads: o.threads });
  const sequence = context.getSequence();
  const r: KvObjectTierRow = {
    cold: [],
    objectTtft: [],
    restore: [],
    floor: [],
    get: [],
    sdkGet: [],
    load: [],
    disk: [],
    bytes: 0,
    tiers: [],
  };
  /** Milliseconds from the call to the first chunk, and the result. */
  const ttft = async (engine: LlamaEngine, prompt: string) => {
    const t0 = performance.now();
    let first: number | undefined;
    const result = await engine.generate('bench', textGenerationInput.parse({ prompt, max_tokens: 4, min_tokens: 4, temperature: 0 }), {
      owner: 'bench',
      onChunk: () => (first ??= performance.now()),
    });
    return { ms: (first ?? performance.now()) - t0, result };
  };
  try {
    for (let run = 0; run < o.runs; run++) {
      const prompt = o.promptOf(o.prefixTokens, 1000 + run);
      const cold = await ttft(seen.engine, prompt);
      await seen.store.settled();
      const restored = await ttft(fresh.engine, prompt);
      await fresh.store.settled();
      const restore = restored.result.restored;
      r.tiers.push(restore?.tier ?? 'none');
      if (!restore) continue;
      r.cold.push(cold.ms);
      r.objectTtft.push(restored.ms);
      r.restore.push(restore.seconds * 1000);
      r.bytes = restore.bytes;
      const state = (await keysUnder(storage, prefix)).find((k) => k.endsWith(`${restore.name}.kvstate`))!;
      const local = path.join(fresh.snapshots, path.basename(state));
      // The restore's GET was the object's first read since its put. The floor's GETs are as well,
      // each of a copy put just now: alone, MinIO served a 16 MiB first read in ~65 ms, the next in
      // ~50 and ~35. The plain socket's and the SDK's take turns going first.
      const copies = [`${prefix}floor/plain-${path.basename(state)}`, `${prefix}floor/sdk-${path.basename(state)}`];
      for (const copy of copies) await storage.putFile(copy, local);
      const timed = async (plain: boolean) => timedGet(storage, copies[plain ? 0 : 1], plain);
      let get: number;
      let sdkGet: number;
      if (run % 2 === 0) {
        get = await timed(true);
        sdkGet = await timed(false);
      } else {
        sdkGet = await timed(false);
        get = await timed(true);
      }
      r.sdkGet.push(sdkGet);
      await sequence.clearHistory();
      const t0 = performance.now();
      await sequence.loadStateFromFile(local, { acceptRisk: true });
      const load = performance.now() - t0;
      r.get.push(get);
      r.load.push(load);
      r.floor.push(get + load);
      // The model unloaded and loaded again (as after an idle unload): the disk tier holds the
      // state this process downloaded and checked, so it is loaded without being read twice.
      await fresh.engine.unload('bench');
      await fresh.engine.load('bench', o.file);
      const again = await ttft(fresh.engine, prompt);
      await fresh.store.settled();
      if (again.result.restored?.tier === 'disk') r.disk.push(again.result.restored.seconds * 1000);
      for (const key of await keysUnder(storage, prefix)) await storage.delete(key);
    }
  } finally {
    await context.dispose();
    await model.dispose();
    for (const node of nodes) {
      await node.engine.dispose();
      await rm(node.snapshots, { recursive: true, force: true });
    }
    for (const key of await keysUnder(storage, prefix)) await storage.delete(key);
  }
  const med = (v: number[]) => percentile(v, 50);
  const speedup = med(r.cold) / med(r.objectTtft);
  const overhead = med(r.restore) / med(r.floor);
  const sdkOverhead = med(r.restore) / med(r.sdkGet.map((get, i) => get + r.load[i]));
  const rows = [
    {
      row: `TTFT of a ${o.prefixTokens}-token prefix restored from object storage on a node that never saw it ÷ cold prefill`,
      figures: `cold ${ms(med(r.cold))}, restored ${ms(med(r.objectTtft))}`,
      ratio: `${speedup.toFixed(1)}× faster`,
      floor: '≥ 5× faster',
      met: speedup >= 5 ? 'yes' : 'NO',
    },
    {
      row: "restore time ÷ (raw GET of the snapshot's bytes + llama.cpp's own state load)",
      figures: `restore ${ms(med(r.restore))}; GET ${ms(med(r.get))} (a first read since the put, on the plain socket the restore uses; through the SDK's stream ${ms(med(r.sdkGet))}) + load ${ms(med(r.load))} (${(r.bytes / 2 ** 20).toFixed(1)} MiB)`,
      ratio: `${overhead.toFixed(2)}× (${sdkOverhead.toFixed(2)}× against the SDK's GET)`,
      floor: '≤ 1.3×',
      met: overhead <= 1.3 ? 'yes' : 'NO',
    },
  ];
  if (r.disk.length > 0) {
    rows.push({
      row: "restore from the node's disk tier, the model unloaded and loaded again ÷ llama.cpp's own state load",
      figures: `restore ${ms(med(r.disk))} (${r.disk.length} of ${o.runs} runs from disk); load ${ms(med(r.load))}`,
      ratio: `${(med(r.disk) / med(r.load)).toFixed(2)}×`,
      floor: 'none',
      met: '-',
    });
  }
  if (r.tiers.some((t) => t !== 'object'))
    rows.push({ row: 'runs not restored from object storage', figures: r.tiers.join(', '), ratio: '-', floor: 'none', met: 'NO' });
  return { rows, raw: r };
}

/** Milliseconds to read `key` through and drop its bytes, on a plain socket or through the SDK's stream. */
async function timedGet(storage: Storage, key: string, plain: boolean): Promise<number> {
  const t0 = performance.now();
  await storage.readInto(key, () => undefined, { plain });
  return performance.now() - t0;
}

async function keysUnder(storage: Storage, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const page of storage.list(prefix)) keys.push(...page);
  return keys;
}
