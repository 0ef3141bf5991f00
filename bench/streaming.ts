/**
 * Streaming through the API: time to the first output event of the SSE stream (from the create
 * request) and tokens/s as the client receives them, next to node-llama-cpp in this process.
 * API and direct runs alternate, so both see the same machine; the batching table has the same
 * pair for N concurrent streams, so the engine's own batching gain is the floor beside the API's.
 */
import path from 'node:path';
import { textGenerationInput } from '../domain/tasks/text-generation';
import { LlamaEngine } from '../engines/llama/engine';
import { TINY_LLAMA } from '../infra/seed';
import { writeLlamaGguf } from '../tools/gguf/gguf-writer';
import { cpuBetween, cpuByProcess } from './cpu';
import { apiToken, call, DATA_DIR, ms, percentile, saveResult, streamPrediction, table } from './lib';

async function sseOnce(token: string, tokens: number): Promise<Run> {
  const { created, ttft, total } = await streamPrediction(token, 'kiln/tiny-llama', {
    prompt: 'Once upon a time',
    max_tokens: tokens,
    min_tokens: tokens,
  });
  return { created, ttft, total, tokensPerSecond: tokens / ((total - ttft) / 1000) };
}

/** `created`: when the create request was answered (API runs), from which the stream's own share of TTFT counts. */
type Run = { created?: number; ttft: number; total: number; tokensPerSecond: number };

async function directOnce(engine: LlamaEngine, tokens: number): Promise<Run> {
  const t0 = performance.now();
  let first: number | undefined;
  let last = 0;
  await engine.generate('direct', textGenerationInput.parse({ prompt: 'Once upon a time', max_tokens: tokens, min_tokens: tokens }), {
    onChunk: () => {
      first ??= performance.now();
      last = performance.now();
    },
  });
  return { ttft: first! - t0, total: last - t0, tokensPerSecond: tokens / ((last - first!) / 1000) };
}

/**
 * Aggregate tokens/s of N streams at once = all their tokens / (first token of any → last token of
 * all); `spread`: first token of the last stream to start − first token of any.
 */
async function aggregateOf(n: number, tokens: number, once: () => Promise<Run>): Promise<{ tokensPerSecond: number; spread: number }> {
  const streams = await Promise.all(Array.from({ length: n }, once));
  const firstAt = Math.min(...streams.map((x) => x.ttft));
  const lastAt = Math.max(...streams.map((x) => x.total));
  return { tokensPerSecond: (n * tokens) / ((lastAt - firstAt) / 1000), spread: Math.max(...streams.map((x) => x.ttft)) - firstAt };
}

export async function streaming(opts: { runs: number; tokens: number; concurrency: number[] }) {
  const token = await apiToken();
  await call(token, '/v1/models/kiln/tiny-llama/predictions', { input: { prompt: 'warm', max_tokens: 2 } }, { prefer: 'wait' });
  const file = path.join(DATA_DIR, 'seed', 'tiny-llama.gguf');
  await writeLlamaGguf(file, TINY_LLAMA);
  // As the engine worker runs it: one thread, four sequences.
  const engine = new LlamaEngine({ gpu: 'auto', contextSize: 4096, sequences: 4, threads: 1 });
  await engine.load('direct', file);
  const api: Run[] = [];
  const direct: Run[] = [];
  // CPU seconds by process while each path ran: what the API's stream costs beside the engine's own work.
  const cpu = { api: {} as Record<string, number>, direct: {} as Record<string, number> };
  const timed = async <T>(into: Record<string, number>, run: () => Promise<T>): Promise<T> => {
    const before = cpuByProcess();
    const out = await run();
    for (const [k, v] of Object.entries(cpuBetween(before, cpuByProcess()))) into[k] = (into[k] ?? 0) + v;
    return out;
  };
  for (let i = 0; i < opts.runs; i++) {
    api.push(await timed(cpu.api, () => sseOnce(token, opts.tokens)));
    direct.push(await timed(cpu.direct, () => directOnce(engine, opts.tokens)));
  }
  const row = (name: string, s: Run[]) => ({
    path: name,
    runs: s.length,
    'create p50':
      s[0].created === undefined
        ? '-'
        : ms(
            percentile(
              s.map((x) => x.created!),
              50,
            ),
          ),
    'TTFT p50': ms(
      percentile(
        s.map((x) => x.ttft),
        50,
      ),
    ),
    'TTFT p99': ms(
      percentile(
        s.map((x) => x.ttft),
        99,
      ),
    ),
    'TTFT − create p50':
      s[0].created === undefined
        ? '-'
        : ms(
            percentile(
              s.map((x) => x.ttft - x.created!),
              50,
            ),
          ),
    'first→last token, tokens/s p50': Number(
      percentile(
        s.map((x) => x.tokensPerSecond),
        50,
      ).toFixed(0),
    ),
    'request→last token p50': ms(
      percentile(
        s.map((x) => x.total),
        50,
      ),
    ),
  });
  const rows = [row('API: create + SSE (end to end)', api), row('node-llama-cpp direct', direct)];
  table(`Streaming: ${opts.tokens} tokens from kiln/tiny-llama`, rows);
  const perStream = (c: Record<string, number>) =>
    Object.fromEntries(
      Object.entries(c)
        .filter(([, v]) => v > 0)
        .map(([k, v]) => [k, ms((v * 1000) / opts.runs)]),
    );
  table('CPU per stream by process (the direct runs are the load generator’s)', [
    { path: 'API: create + SSE', ...perStream(cpu.api) },
    { path: 'node-llama-cpp direct', ...perStream(cpu.direct) },
  ]);
  const tps = (runs: Run[]) =>
    percentile(
      runs.map((x) => x.tokensPerSecond),
      50,
    );
  const sseRatio = tps(api) / tps(direct);
  console.log(`SSE tokens/s / direct: ${sseRatio.toFixed(2)}×`);
  // The target: TTFT within 20 ms of direct's once the create has been answered.
  const ttftOver =
    percentile(
      api.map((x) => x.ttft - x.created!),
      50,
    ) -
    percentile(
      direct.map((x) => x.ttft),
      50,
    );
  console.log(`TTFT − create, API − direct (p50): ${ttftOver.toFixed(1)} ms`);

  // Continuous batching: N streams at once share one loaded model (N sequences of one context).
  const batching = [];
  let single: { api: number; direct: number } | undefined;
  for (const n of opts.concurrency) {
    const apiRounds: number[] = [];
    const directRounds: number[] = [];
    const spreads: number[] = [];
    for (let r = 0; r < Math.max(3, Math.ceil(opts.runs / 2)); r++) {
      const round = await aggregateOf(n, opts.tokens, () => sseOnce(token, opts.tokens));
      apiRounds.push(round.tokensPerSecond);
      spreads.push(round.spread);
      directRounds.push((await aggregateOf(n, opts.tokens, () => directOnce(engine, opts.tokens))).tokensPerSecond);
    }
    const now = { api: percentile(apiRounds, 50), direct: percentile(directRounds, 50) };
    single ??= n === 1 ? now : undefined;
    batching.push({
      'concurrent streams': n,
      rounds: apiRounds.length,
      'API aggregate tokens/s p50': Number(now.api.toFixed(0)),
      'API vs 1 stream': single ? `${(now.api / single.api).toFixed(2)}×` : '-',
      'direct aggregate tokens/s p50': Number(now.direct.toFixed(0)),
      'direct vs 1 stream': single ? `${(now.direct / single.direct).toFixed(2)}×` : '-',
      'API ÷ direct': `${(now.api / now.direct).toFixed(2)}×`,
      // Streams through the API start one create apart; direct ones all at once.
      'API first-token spread p50': ms(percentile(spreads, 50)),
    });
  }
  await engine.dispose();
  table(`Batching: aggregate tokens/s of concurrent streams, ${opts.tokens} tokens each, through the API and direct`, batching);
  console.log(`saved ${await saveResult('streaming', { single: rows, sseRatio, batching })}`);
}
