/**
 * Cold starts against their floors, in one run: for a generated GGUF of each size, push it, then
 * time the first prediction (download + load), a cold start from the node's disk cache (after
 * scale to zero), and a warm call; next to the raw S3 GET throughput of the same blob and the raw
 * llama.cpp load time of the same file in this process.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { LlamaEngine } from '../engines/llama/engine';
import { ModelCache } from '../engines/model-cache';
import { config } from '../lib/config';
import { blobKey, Storage } from '../lib/storage';
import { writeLlamaGguf } from '../tools/gguf/gguf-writer';
import { apiToken, call, DATA_DIR, pushGguf, saveResult, table } from './lib';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Layers of a 1024-wide F32 LLaMA are ~40 MiB each: enough of them make the size asked for. */
function specFor(megabytes: number) {
  const layers = Math.max(1, Math.round(megabytes / 41));
  return { embedding: 1024, heads: 16, feedForward: 2816, layers, type: 'F32' as const, contextLength: 2048, seed: megabytes };
}

async function sha256(file: string) {
  const h = createHash('sha256');
  for await (const c of createReadStream(file, { highWaterMark: 8 * 2 ** 20 })) h.update(c as Buffer);
  return h.digest('hex');
}

const secondsFrom = (logs: string, re: RegExp) => Number(re.exec(logs)?.[1] ?? NaN);

export async function coldStart(opts: { sizes: number[] }) {
  const token = await apiToken();
  const storage = Storage.fromConfig(config());
  const dir = path.join(DATA_DIR, 'bench', 'models');
  await mkdir(dir, { recursive: true });
  const rows = [];
  for (const mb of opts.sizes) {
    const file = path.join(dir, `cold-${mb}.gguf`);
    await writeLlamaGguf(file, specFor(mb));
    const { size } = await stat(file);
    const digest = await sha256(file);
    const model = await pushGguf(token, { path: file, sha256: digest, size }, `cold-${mb}mb-${Date.now().toString(36)}`, {
      idleTtlSeconds: 1,
      sequences: 1,
      contextSize: 512,
    });
    const predict = () =>
      call(token, `/v1/models/${model}/predictions`, { input: { prompt: 'cold', max_tokens: 1 } }, { prefer: 'wait=60' });

    // Truly cold: the engine nodes of this stack (same data dir) must not have the blob on disk
    // from an earlier run of this benchmark.
    const caches = path.join(DATA_DIR, 'cache');
    for (const node of await readdir(caches).catch(() => [] as string[])) {
      await new ModelCache(path.join(caches, node), storage).forget(digest);
    }
    // The floors first: the same blob straight from S3, the same file straight into llama.cpp.
    // A read right after the upload is slower than any later one (MinIO is still writing the
    // object out), and a user calls a model later than that: one untimed read lets it settle,
    // so the floor and the cold start read the same settled object.
    const getBlob = async () => {
      let got = 0;
      for await (const c of await storage.read(blobKey(digest))) got += (c as Buffer).length;
      return got;
    };
    await getBlob();
    // Writes of the run so far (the generated file, MinIO's copy) go to disk now, not while the
    // cold start writes its own copy.
    execFileSync('sync');
    const getT = performance.now();
    const got = await getBlob();
    const getSeconds = (performance.now() - getT) / 1000;
    const engine = new LlamaEngine({ gpu: 'auto', contextSize: 512, sequences: 1, threads: 1 });
    await engine.backend();
    const loadT = performance.now();
    await engine.load('floor', file, { contextSize: 512, sequences: 1 });
    const loadSeconds = (performance.now() - loadT) / 1000;
    await engine.dispose();

    const t0 = performance.now();
    const cold = await predict();
    const coldMs = performance.now() - t0;
    const warmT = performance.now();
    await predict();
    const warmMs = performance.now() - warmT;
    // Scale to zero (1 s idle TTL, 5 s reaper, 5 s grace), then a cold start from the disk cache.
    await sleep(13_000);
    const cachedT = performance.now();
    const cached = await predict();
    const cachedMs = performance.now() - cachedT;

    const download = secondsFrom(cold.logs, /Downloaded [\d.]+ MiB in ([\d.]+) s/);
    const load = secondsFrom(cold.logs, /Loaded in ([\d.]+) s/);
    rows.push({
      size: `${(size / 2 ** 20).toFixed(0)} MiB`,
      'cold (download+load) s': Number((coldMs / 1000).toFixed(2)),
      'of which download s': download,
      'of which load s': load,
      'setup_time s': cold.metrics.setup_time,
      'cold from disk cache s': Number((cachedMs / 1000).toFixed(2)),
      'warm s': Number((warmMs / 1000).toFixed(3)),
      'S3 GET floor s': Number(getSeconds.toFixed(2)),
      'S3 GET MiB/s': Number((got / 2 ** 20 / getSeconds).toFixed(0)),
      'llama.cpp load floor s': Number(loadSeconds.toFixed(2)),
      'setup / (GET + load floors)': Number((cold.metrics.setup_time / (getSeconds + loadSeconds)).toFixed(2)),
    });
    void cached;
    await rm(file, { force: true });
  }
  table('Cold start (generated F32 GGUF, 1 token)', rows);
  console.log(`saved ${await saveResult('cold-start', rows)}`);
}
