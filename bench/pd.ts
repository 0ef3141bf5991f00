/**
 * Issue 35's benchmark: prefill/decode disaggregation under a mixed load. A steady set of decoding
 * streams runs while long prompts (~2,000 tokens) arrive at a fixed rate; measured are the streams'
 * time per output token (p50, p99), the long prompts' time to first token and the aggregate output
 * tokens/s, colocated (one `both` node on all the cores) against split (a `prefill` node and a
 * `decode` node, each pinned to a core of its own with taskset), each beside the same streams with
 * no long prompts. The engine nodes are started here beside the bench stack's own, and a fresh
 * version per layout is placed on them (they offer less memory than the stack's node, so best fit
 * puts it there). The API must split prompts of this length: run with
 * KILN_PREFILL_SPLIT_MIN_TOKENS at or below a quarter of the prompt's characters.
 */
import { mkdir, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { type LlamaSpecInput, writeLlamaGguf } from '../tools/gguf/gguf-writer';
import { BATCHING_MODELS } from './batching';
import { startEngineNode, stopEngineNode } from './engine-nodes';
import { apiToken, call, DATA_DIR, percentile, pushGguf, saveResult, streamPrediction, table, unlimitedFor } from './lib';

export interface PdOptions {
  /** Seconds of each phase (streams alone, then with long prompts arriving). */
  seconds: number;
  /** Decoding streams kept going. */
  streams: number;
  /** Tokens each stream's prediction generates. */
  streamTokens: number;
  /** Tokens of each long prompt (one token a character with the generated vocabulary). */
  promptTokens: number;
  /** Seconds between long prompts: both layouts get the same rate, one that a prefill node's one core can keep up with. */
  intervalS: number;
}

/** A generated model whose trained context holds the long prompt: the batching benchmark's small one, deeper. */
const MODEL: LlamaSpecInput = { ...BATCHING_MODELS.small, layers: 8, contextLength: 4096 };

/** The issue's targets. */
const TARGETS = { stallRatio: 1.5, ttftRatio: 1.2, throughputRatio: 0.9 };

const FILLER = 'the kiln was warm and the model ran on it all night long ';

type Layout = 'colocated' | 'split';

/** The engine nodes of a layout: role, the cores it is pinned to, its llama.cpp threads. */
function nodesOf(layout: Layout, run: string) {
  const cpus = os.availableParallelism();
  const all = cpus > 1 ? `0-${cpus - 1}` : '0';
  if (layout === 'colocated') return [{ id: `pd-both-${run}`, role: 'both', cores: all, threads: cpus }];
  const half = Math.max(1, Math.floor(cpus / 2));
  return [
    { id: `pd-prefill-${run}`, role: 'prefill', cores: half > 1 ? `0-${half - 1}` : '0', threads: half },
    { id: `pd-decode-${run}`, role: 'decode', cores: cpus - half > 1 ? `${half}-${cpus - 1}` : String(half), threads: cpus - half },
  ];
}

/** Starts an engine node of a layout, pinned to its cores. */
const startNode = (n: ReturnType<typeof nodesOf>[number]) =>
  startEngineNode({
    id: n.id,
    cores: n.cores,
    env: { KILN_ENGINE_ROLE: n.role, KILN_ENGINE_THREADS: String(n.threads), KILN_NODE_MEMORY_MB: '3000' },
  });

/** A long prompt no other one shares more than its first few characters with (no prefix reuse). */
const longPrompt = (tokens: number, i: number) =>
  `q${i}x${Date.now().toString(36)} ${FILLER.repeat(Math.ceil(tokens / FILLER.length))}`.slice(0, tokens - 1);

/** A long prompt: when it was sent (ms into the phase), its TTFT, and the metrics that say where its time went. */
interface LongPrompt {
  at: number;
  ttft: number;
  metrics: Record<string, number | string>;
}

/** A stream prediction's span (ms into the phase) and time per output token (ms). */
interface StreamRun {
  from: number;
  to: number;
  tpot: number;
}

interface Phase {
  /** Time per output token of each stream prediction, ms. */
  tpot: number[];
  ttft: number[];
  outputTokens: number;
  seconds: number;
  split: number;
  longs: LongPrompt[];
  runs: StreamRun[];
}

/** `streams` streams for `seconds`, and long prompts every `intervalS` seconds when `long` is set. */
async function phase(token: string, model: string, o: PdOptions, long: boolean): Promise<Phase> {
  const end = performance.now() + o.seconds * 1000;
  const result: Phase = { tpot: [], ttft: [], outputTokens: 0, seconds: 0, split: 0, longs: [], runs: [] };
  const t0 = performance.now();
  const stream = async (s: number) => {
    for (let i = 0; performance.now() < end; i++) {
      const input = { prompt: `s${s}-${i} the kiln`, max_tokens: o.streamTokens, min_tokens: o.streamTokens, temperature: 0 };
      const from = performance.now() - t0;
      const r = await streamPrediction(token, model, input);
      const tpot = (r.total - r.ttft) / (o.streamTokens - 1);
      result.tpot.push(tpot);
      result.runs.push({ from: from + r.ttft, to: from + r.total, tpot });
      result.outputTokens += o.streamTokens;
    }
  };
  const longs: Array<Promise<void>> = [];
  const arrivals = long
    ? (async () => {
        for (let i = 0; performance.now() < end; i++) {
          longs.push(
            (async () => {
              const input = { prompt: longPrompt(o.promptTokens, i), max_tokens: 16, min_tokens: 16, temperature: 0 };
              const at = performance.now() - t0;
              const r = await streamPrediction(token, model, input);
              result.ttft.push(r.ttft);
              result.outputTokens += 16;
              const p = await call(token, `/v1/predictions/${r.id}`);
              if (p.metrics?.prefill_split === 'restored') result.split += 1;
              result.longs.push({ at, ttft: r.ttft, metrics: p.metrics ?? {} });
            })(),
          );
          await new Promise((resolve) => setTimeout(resolve, o.intervalS * 1000));
        }
      })()
    : Promise.resolve();
  await Promise.all([...Array.from({ length: o.streams }, (_, s) => stream(s)), arrivals]);
  await Promise.all(longs);
  result.seconds = (performance.now() - t0) / 1000;
  return result;
}

const ms = (seconds: number | string | undefined) => (typeof seconds === 'number' ? Math.round(seconds * 1000) : '-');

/** Each long prompt: sent at, TTFT, and the steps its metrics time (prefill and upload on the prefill node, the decode node's queue, restore and first token). */
function longPromptRows(p: Phase): Array<Record<string, string | number>> {
  return [...p.longs]
    .sort((a, b) => a.at - b.at)
    .map((l) => ({
      'sent at': Math.round(l.at),
      TTFT: Math.round(l.ttft),
      'prefill wait': ms(l.metrics.prefill_wait_time),
      prefill: ms(l.metrics.prefill_time),
      'kv upload': ms(l.metrics.kv_upload_time),
      'decode queue': ms(l.metrics.queue_time),
      restore: ms(l.metrics.restore_time),
      'decode first token': ms(l.metrics.time_to_first_token),
      split: String(l.metrics.prefill_split ?? 'colocated'),
    }));
}

/** The five slowest stream predictions, with the long prompts whose first token came between their first and last. */
function slowestRuns(p: Phase): Array<Record<string, string | number>> {
  return [...p.runs]
    .sort((a, b) => b.tpot - a.tpot)
    .slice(0, 5)
    .map((r) => ({
      'TPOT (ms)': Number(r.tpot.toFixed(1)),
      from: Math.round(r.from),
      to: Math.round(r.to),
      'long prompts (first token at)': p.longs
        .filter((l) => l.at + l.ttft >= r.from && l.at + l.ttft <= r.to)
        .map(
          (l) =>
            `${Math.round(l.at + l.ttft)}${l.metrics.prefill_split === 'prefilled on the decode node' ? ' (prefilled on decode)' : ''}`,
        )
        .join(', '),
    }));
}

export async function pd(o: PdOptions): Promise<void> {
  const token = await apiToken();
  await unlimitedFor(token, ['text-generation']);
  const run = Date.now().toString(36);
  const spec = MODEL;
  const dir = path.join(DATA_DIR, 'bench', 'models');
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, 'pd-model.gguf');
  const written = await writeLlamaGguf(file, { ...spec, name: 'kiln-pd' });
  const contextSize = Math.ceil((o.promptTokens + 64) / 256) * 256;
  console.log(
    `model: ${(written.size / 2 ** 20).toFixed(0)} MiB, ${(written.parameters / 1e6).toFixed(0)}M parameters, ${spec.type}; ` +
      `${o.streams} streams of ${o.streamTokens} tokens; a ${o.promptTokens}-token prompt every ${o.intervalS} s; ${o.seconds} s a phase; ` +
      `${os.availableParallelism()} cores; load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
  );
  const rows: Array<Record<string, string | number>> = [];
  const figures: Record<string, { quiet: Phase; loaded: Phase }> = {};
  const aloneTtft: Record<string, number> = {};
  for (const layout of ['colocated', 'split'] as const) {
    const nodes = nodesOf(layout, run);
    const children = await Promise.all(nodes.map(startNode));
    try {
      const model = await pushGguf(token, { path: file, sha256: written.sha256, size: (await stat(file)).size }, `pd-${layout}-${run}`, {
        sequences: o.streams + 2,
        contextSize,
      });
      // Loads the version where the layout's nodes are (cold start), then its prefill node too (a first long prompt).
      const warm = await call(
        token,
        `/v1/models/${model}/predictions`,
        { input: { prompt: 'warm', max_tokens: 2 } },
        { prefer: 'wait=60' },
      );
      const warmLong = await call(
        token,
        `/v1/models/${model}/predictions`,
        { input: { prompt: longPrompt(o.promptTokens, -1), max_tokens: 2 } },
        { prefer: 'wait=60' },
      );
      // One long prompt on its own, the layout warm: the TTFT the arrival rate is weighed against.
      const alone = await streamPrediction(token, model, { prompt: longPrompt(o.promptTokens, -2), max_tokens: 2, temperature: 0 });
      const aloneMetrics = (await call(token, `/v1/predictions/${alone.id}`)).metrics ?? {};
      console.log(
        `${layout}: ${nodes.map((n) => `${n.id} (${n.role}, cores ${n.cores}, ${n.threads} threads)`).join(', ')}; ` +
          `warm-up ${warm.status}; long prompt ${warmLong.metrics?.input_token_count} tokens, ` +
          `prefill ${warmLong.metrics?.prefill_node ?? 'colocated'} → decode ${warmLong.metrics?.decode_node ?? 'colocated'}; ` +
          `one alone: TTFT ${alone.ttft.toFixed(0)} ms` +
          (aloneMetrics.prefill_time !== undefined ? ` (prefill ${ms(aloneMetrics.prefill_time)} ms on one core)` : ''),
      );
      if (aloneMetrics.prefill_time !== undefined && o.intervalS < 1.5 * Number(aloneMetrics.prefill_time)) {
        console.log(
          `  one long prompt every ${o.intervalS} s keeps the prefill node busy ${((100 * Number(aloneMetrics.prefill_time)) / o.intervalS).toFixed(0)} % of the time: its queue grows`,
        );
      }
      aloneTtft[layout] = alone.ttft;
      const quiet = await phase(token, model, o, false);
      const loaded = await phase(token, model, o, true);
      figures[layout] = { quiet, loaded };
      const f = (v: number) => Number(v.toFixed(1));
      rows.push({
        layout,
        'TPOT p50 quiet (ms)': f(percentile(quiet.tpot, 50)),
        'TPOT p99 quiet (ms)': f(percentile(quiet.tpot, 99)),
        'TPOT p50 loaded (ms)': f(percentile(loaded.tpot, 50)),
        'TPOT p99 loaded (ms)': f(percentile(loaded.tpot, 99)),
        'p99 loaded ÷ quiet': Number((percentile(loaded.tpot, 99) / percentile(quiet.tpot, 99)).toFixed(2)),
        'long TTFT p50 (ms)': f(percentile(loaded.ttft, 50)),
        'long TTFT p99 (ms)': f(percentile(loaded.ttft, 99)),
        'tok/s loaded': f(loaded.outputTokens / loaded.seconds),
        'long prompts (split)': `${loaded.ttft.length} (${loaded.split})`,
      });
    } finally {
      await Promise.all(children.map(stopEngineNode));
    }
  }
  table('decode streams beside long prompts, colocated and split (this machine is shared: ratios within one run only)', rows);
  for (const [layout, { loaded }] of Object.entries(figures)) {
    table(`${layout}: where each long prompt's time to first token went (ms; the metrics the prediction carries)`, longPromptRows(loaded));
    table(`${layout}: the slowest stream predictions and the long prompts whose first token came while they decoded`, slowestRuns(loaded));
  }
  const { colocated, split } = figures;
  const stall = (l: { quiet: Phase; loaded: Phase }) => percentile(l.loaded.tpot, 99) / percentile(l.quiet.tpot, 99);
  const ttft = percentile(split.loaded.ttft, 50) / percentile(colocated.loaded.ttft, 50);
  const tput = split.loaded.outputTokens / split.loaded.seconds / (colocated.loaded.outputTokens / colocated.loaded.seconds);
  const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');
  console.log(
    [
      `decode p99 TPOT with long prompts ÷ without, split: ${stall(split).toFixed(2)}x (target ≤ ${TARGETS.stallRatio}x: ${verdict(stall(split) <= TARGETS.stallRatio)}); colocated: ${stall(colocated).toFixed(2)}x`,
      `long prompts' TTFT p50, split ÷ colocated: ${ttft.toFixed(2)}x (target ≤ ${TARGETS.ttftRatio}x: ${verdict(ttft <= TARGETS.ttftRatio)}); ` +
        `one long prompt alone, split ÷ colocated: ${(aloneTtft.split / aloneTtft.colocated).toFixed(2)}x (${aloneTtft.split.toFixed(0)} / ${aloneTtft.colocated.toFixed(0)} ms)`,
      `aggregate tokens/s, split ÷ colocated: ${tput.toFixed(2)}x (target ≥ ${TARGETS.throughputRatio}x: ${verdict(tput >= TARGETS.throughputRatio)})`,
    ].join('\n'),
  );
  const saved = await saveResult('pd', {
    options: o,
    figures,
    aloneTtft,
    stallSplit: stall(split),
    stallColocated: stall(colocated),
    ttft,
    tput,
  });
  console.log(`saved ${saved}`);
}
