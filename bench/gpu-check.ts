/**
 * The measuring half of the GPU check (infra/gpu-check.sh builds llama.cpp and the model first;
 * infra/gpu-pack.sh bundles this file, so it runs on a host with node and no npm). No Temporal, no
 * Postgres: Kiln's engine (LlamaEngine) in this process, on the addon the check built.
 *
 *   gpu-check.js options [--cpu]   the CMake options of this host's build, one -D option a line:
 *                                   the CPU's instruction sets, and the GPUs' architectures
 *   gpu-check.js measure ...       llama-batched-bench and the engine at N streams, then one KV
 *                                   snapshot save and restore; prints the ratios, writes JSON
 *
 * Each figure of the stream table is generated tokens ÷ total time (prompt included), as
 * llama-batched-bench counts it and bench/batching.ts compares them; every stream gets the same
 * prompt, as there.
 */
import { readFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { textGenerationInput } from '../domain/tasks/text-generation';
import { LlamaEngine } from '../engines/llama/engine';
import { KvSnapshotStore } from '../engines/llama/kv-snapshots';
import { sourceBuildCmakeOptions } from '../infra/gpu-build-plan';
import { listGpus } from '../infra/gpu-host';
import { cpuBuildPlan, cpuinfoFlags } from '../lib/llama-cpu-build';
import { batchedBench } from './llama-floor';
import { stateLoadBreakdown } from './state-load-breakdown';

/** The prompts' text: the generated vocabulary's words, which tokenize one token a character. */
const FILLER = 'the kiln was warm and the model ran on it all night long ';

const promptOf = (tokens: number) => FILLER.repeat(Math.ceil(tokens / 50)).slice(0, Math.max(1, tokens - 1));

const stamp = () => new Date().toISOString().slice(11, 19);
const say = (line: string) => console.log(`[${stamp()}] ${line}`);

/**
 * The store with each save that wrote a file timed (the engine saves after a generation, before
 * it returns; a prompt too short or held by a snapshot already writes none).
 */
class TimedSnapshotStore extends KvSnapshotStore {
  saves: number[] = [];
  override async save(...args: Parameters<KvSnapshotStore['save']>): Promise<void> {
    const [t0, written] = [performance.now(), this.written];
    await super.save(...args);
    if (this.written > written) this.saves.push(performance.now() - t0);
  }
}

interface MeasureOptions {
  addon: string;
  batchedBench: string;
  model: string;
  cpu: boolean;
  streams: number[];
  prompt: number;
  tokens: number;
  kvPrompt: number;
  threads: number;
  json?: string;
}

async function streamsTable(engine: LlamaEngine, o: MeasureOptions) {
  const input = textGenerationInput.parse({ prompt: promptOf(o.prompt), max_tokens: o.tokens, min_tokens: o.tokens, temperature: 0 });
  const rows = [];
  for (const n of o.streams) {
    const floor = await batchedBench(o.batchedBench, o.model, n, o.prompt, o.tokens, o.threads);
    const llamaCpp = (floor.pl * floor.tg) / floor.t;
    const t0 = performance.now();
    const results = await Promise.all(Array.from({ length: n }, () => engine.generate('check', input)));
    const seconds = (performance.now() - t0) / 1000;
    const generated = results.reduce((sum, r) => sum + r.outputTokens, 0);
    const kiln = generated / seconds;
    const row = {
      streams: n,
      'llama.cpp flash_attn': (floor as { flash_attn?: number }).flash_attn ?? '-',
      'llama-batched-bench tok/s': Number(llamaCpp.toFixed(1)),
      'Kiln engine tok/s': Number(kiln.toFixed(1)),
      'engine ÷ llama.cpp': Number((kiln / llamaCpp).toFixed(2)),
      'tokens generated': generated,
    };
    say(
      `${n} stream(s): llama-batched-bench ${row['llama-batched-bench tok/s']} tok/s, Kiln engine ${row['Kiln engine tok/s']} tok/s, ratio ${row['engine ÷ llama.cpp']}×`,
    );
    rows.push(row);
  }
  return rows;
}

/** One save after a cold prefill, then a restore into a freshly loaded context (as after scale-to-zero). */
async function snapshotRound(engine: LlamaEngine, store: TimedSnapshotStore, o: MeasureOptions, contextSize: number) {
  const input = textGenerationInput.parse({ prompt: promptOf(o.kvPrompt), max_tokens: 1, temperature: 0 });
  await engine.load('kv', o.model, { sequences: 1, contextSize });
  let t0 = performance.now();
  const cold = await engine.generate('kv', input);
  const coldMs = performance.now() - t0;
  await engine.unload('kv');
  await engine.load('kv', o.model, { sequences: 1, contextSize });
  t0 = performance.now();
  const warm = await engine.generate('kv', input);
  const restoredMs = performance.now() - t0;
  await engine.unload('kv');
  if (!warm.restored) throw new Error(`the second request restored no snapshot (${store.written} written)`);
  const row = {
    'prompt tokens': cold.inputTokens,
    'cold request ms': Number(coldMs.toFixed(1)),
    'save ms': Number((store.saves.at(-1) ?? NaN).toFixed(1)),
    'snapshot MiB': Number((store.bytes / 2 ** 20).toFixed(1)),
    'restore ms': Number((warm.restored.seconds * 1000).toFixed(1)),
    'restored tokens': warm.restored.tokens,
    'restored request ms': Number(restoredMs.toFixed(1)),
    'cold ÷ restored request': Number((coldMs / restoredMs).toFixed(2)),
  };
  say(
    `KV snapshot of ${row['prompt tokens']} tokens: save ${row['save ms']} ms (${row['snapshot MiB']} MiB), restore ${row['restore ms']} ms; request ${row['cold request ms']} ms cold, ${row['restored request ms']} ms restored`,
  );
  return row;
}

async function measure(o: MeasureOptions) {
  const maxN = Math.max(...o.streams);
  const contextSize = Math.max(256, Math.ceil((o.prompt + o.tokens + 8) / 256) * 256);
  const kvContext = Math.ceil((o.kvPrompt + 64) / 256) * 256;
  const snapshotDir = path.join(os.tmpdir(), `kiln-gpu-check-kv-${process.pid}`);
  const store = new TimedSnapshotStore({ dir: snapshotDir, budgetBytes: 2 ** 34, minTokens: Math.min(256, o.kvPrompt) });
  const engine = new LlamaEngine({
    gpu: o.cpu ? 'false' : 'cuda',
    contextSize,
    sequences: maxN,
    threads: o.threads,
    addonDir: o.addon,
    snapshots: store,
  });
  try {
    say(`engine: loading ${path.basename(o.model)} (${maxN} sequences of ${contextSize} tokens)`);
    await engine.load('check', o.model, { sequences: maxN, contextSize });
    const gpu = await engine.gpu();
    say(`engine backend: ${gpu ?? 'cpu'}, ${engine.binary}; ${o.threads} thread(s)`);
    if (!o.cpu && !gpu) throw new Error('the addon runs on the CPU: the CUDA build did not load a GPU');
    // One unmeasured generation first, as llama-batched-bench warms up before it times.
    await engine.generate('check', textGenerationInput.parse({ prompt: promptOf(o.prompt), max_tokens: 8, temperature: 0 }));
    const streams = await streamsTable(engine, o);
    await engine.unload('check');
    say('KV snapshot: cold request, save, reload, restore');
    const snapshot = await snapshotRound(engine, store, o, kvContext);
    say('KV state load: prefill, save, file read and load, flash attention off and on');
    // After the figures above, and never at their cost: a failure here is printed and the check goes on.
    const stateLoad = await stateLoadBreakdown(await engine.backend(), {
      model: o.model,
      prompt: promptOf(o.kvPrompt),
      contextSize: kvContext,
      threads: o.threads,
      dir: snapshotDir,
    }).catch((err: Error) => {
      say(`the KV state load breakdown failed: ${err.message}`);
      return [];
    });
    console.log(
      `\nGPU check: Kiln engine ÷ llama-batched-bench, ${o.tokens} tokens a stream after a ${o.prompt}-token prompt (issue 19's target at 16 streams: ≥ 0.8×)`,
    );
    console.table(streams);
    console.log(`KV snapshot save and restore (${path.basename(o.model)})`);
    console.table([snapshot]);
    if (stateLoad.length > 0) {
      console.log(`KV state load into a context of its own, llama.cpp's save and load (${o.kvPrompt}-token prompt)`);
      console.table(stateLoad);
    }
    if (o.json) {
      await writeFile(
        o.json,
        JSON.stringify(
          {
            at: new Date().toISOString(),
            host: os.hostname(),
            backend: gpu ?? 'cpu',
            binary: engine.binary,
            options: o,
            streams,
            snapshot,
            stateLoad,
          },
          null,
          2,
        ),
      );
      say(`figures written to ${o.json}`);
    }
  } finally {
    await engine.dispose();
    await rm(snapshotDir, { recursive: true, force: true });
  }
}

async function cmakeOptions(cpu: boolean) {
  const cpuFlags = cpuinfoFlags(readFileSync('/proc/cpuinfo', 'utf8'));
  if (cpu) return cpuBuildPlan(cpuFlags).options;
  const gpus = await listGpus();
  if (gpus.length === 0) throw new Error('nvidia-smi lists no GPU');
  return Object.entries(sourceBuildCmakeOptions(gpus, cpuFlags));
}

const int = (v: string) => Number.parseInt(v, 10);
const program = new Command('gpu-check').description("The GPU check's measurements (infra/gpu-check.sh runs them)");
program
  .command('options')
  .option('--cpu', 'CPU only (the dry run)', false)
  .action(async (o: { cpu: boolean }) => {
    for (const [k, v] of await cmakeOptions(o.cpu)) console.log(`-D${k}=${v}`);
  });
program
  .command('measure')
  .requiredOption('--addon <dir>', 'the folder of the llama-addon.node built')
  .requiredOption('--batched-bench <file>', 'llama-batched-bench, from the same build')
  .requiredOption('--model <file>', 'the GGUF to run')
  .option('--cpu', 'CPU only (the dry run)', false)
  .option('--streams <list>', 'stream counts', (v) => v.split(',').map(int), [1, 4, 16])
  .option('--prompt <n>', 'prompt tokens a stream', int, 128)
  .option('--tokens <n>', 'tokens generated a stream', int, 128)
  .option('--kv-prompt <n>', 'prompt tokens of the KV snapshot', int, 2000)
  .option('--threads <n>', 'CPU threads (both sides)', int, os.availableParallelism())
  .option('--json <file>', 'where the figures go as JSON')
  .action(async (o: MeasureOptions) => {
    if (o.json) await mkdir(path.dirname(o.json), { recursive: true });
    await measure(o);
  });

program.parseAsync().catch((err) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : err);
  process.exit(1);
});
