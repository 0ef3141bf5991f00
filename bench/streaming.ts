/**
 * Streaming through the API: time to the first output event of the SSE stream (from the create
 * request) and tokens/s as the client receives them, next to node-llama-cpp in this process.
 */
import path from 'node:path';
import { TINY_LLAMA } from '../infra/seed';
import { textGenerationInput } from '../tasks/text-generation';
import { LlamaEngine } from '../workers/engines/llama-engine';
import { writeLlamaGguf } from '../workers/engines/gguf-writer';
import { apiToken, call, DATA_DIR, ms, percentile, saveResult, table } from './lib';

async function sseOnce(token: string, tokens: number) {
  const t0 = performance.now();
  const p = await call(token, '/v1/models/kiln/tiny-llama/predictions', {
    input: { prompt: 'Once upon a time', max_tokens: tokens, min_tokens: tokens },
  });
  const res = await fetch(p.urls.stream, { headers: { accept: 'text/event-stream' } });
  const { EventSourceParserStream } = await import('eventsource-parser/stream');
  const reader = res.body!.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  let first: number | undefined;
  let last = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done || value.event === 'done') break;
    if (value.event === 'output') {
      first ??= performance.now();
      last = performance.now();
    }
  }
  return { ttft: first! - t0, total: last - t0, tokensPerSecond: tokens / ((last - first!) / 1000) };
}

export async function streaming(opts: { runs: number; tokens: number; concurrency: number[] }) {
  const token = await apiToken();
  await call(token, '/v1/models/kiln/tiny-llama/predictions', { input: { prompt: 'warm', max_tokens: 2 } }, { prefer: 'wait' });
  const api = [];
  for (let i = 0; i < opts.runs; i++) api.push(await sseOnce(token, opts.tokens));

  const file = path.join(DATA_DIR, 'seed', 'tiny-llama.gguf');
  await writeLlamaGguf(file, TINY_LLAMA);
  const engine = new LlamaEngine({ gpu: 'auto', contextSize: 4096, sequences: 4, threads: 1 });
  await engine.load('direct', file);
  const direct = [];
  for (let i = 0; i < opts.runs; i++) {
    const t0 = performance.now();
    let first: number | undefined;
    let last = 0;
    await engine.generate('direct', textGenerationInput.parse({ prompt: 'Once upon a time', max_tokens: opts.tokens, min_tokens: opts.tokens }), {
      onChunk: () => {
        first ??= performance.now();
        last = performance.now();
      },
    });
    direct.push({ ttft: first! - t0, total: last - t0, tokensPerSecond: opts.tokens / ((last - first!) / 1000) });
  }
  await engine.dispose();
  const row = (name: string, s: Array<{ ttft: number; total: number; tokensPerSecond: number }>) => ({
    path: name,
    runs: s.length,
    'TTFT p50': ms(percentile(s.map((x) => x.ttft), 50)),
    'TTFT p99': ms(percentile(s.map((x) => x.ttft), 99)),
    'first→last token, tokens/s p50': Number(percentile(s.map((x) => x.tokensPerSecond), 50).toFixed(0)),
    'request→last token p50': ms(percentile(s.map((x) => x.total), 50)),
  });
  const rows = [row('API: create + SSE (end to end)', api), row('node-llama-cpp direct', direct)];
  table(`Streaming: ${opts.tokens} tokens from kiln/tiny-llama`, rows);

  // Continuous batching: N streams at once share one loaded model (N sequences of one context).
  // Aggregate tokens/s = all tokens of a round / (first token of any → last token of all).
  const batching = [];
  let single: number | undefined;
  for (const n of opts.concurrency) {
    const rounds = [];
    for (let r = 0; r < Math.max(3, Math.ceil(opts.runs / 2)); r++) {
      const t0 = performance.now();
      const streams = await Promise.all(Array.from({ length: n }, () => sseOnce(token, opts.tokens)));
      const firstAt = Math.min(...streams.map((x) => x.ttft));
      const lastAt = Math.max(...streams.map((x) => x.total));
      rounds.push({ aggregate: (n * opts.tokens) / ((lastAt - firstAt) / 1000), wall: performance.now() - t0 });
    }
    const aggregate = percentile(rounds.map((x) => x.aggregate), 50);
    single ??= n === 1 ? aggregate : undefined;
    batching.push({
      'concurrent streams': n,
      rounds: rounds.length,
      'aggregate tokens/s p50': Number(aggregate.toFixed(0)),
      'vs 1 stream': single ? `${(aggregate / single).toFixed(2)}×` : '-',
    });
  }
  table(`Batching: aggregate tokens/s of concurrent SSE streams, ${opts.tokens} tokens each`, batching);
  console.log(`saved ${await saveResult('streaming', { single: rows, batching })}`);
}
