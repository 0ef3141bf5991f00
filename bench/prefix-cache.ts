/**
 * Prefix caching: time to first token of a request whose prompt starts with a long shared prefix
 * (a system prompt of ~2,000 tokens), cold (no sequence holds it) and cached (the request before
 * had the same prefix), through the API and through node-llama-cpp directly in this process (the
 * floor: one sequence, kept between the two calls, or cleared for the cold one). Runs alternate.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { LlamaContextSequence } from 'node-llama-cpp';
import { loadNodeLlamaCpp } from '../engines/llama/engine';
import { defaultEngineThreads } from '../lib/config';
import { newId } from '../lib/ids';
import { type LlamaSpecInput, writeLlamaGguf } from '../tools/gguf/gguf-writer';
import { apiToken, DATA_DIR, ms, percentile, pushGguf, saveResult, streamPrediction, table } from './lib';

/** Big enough that evaluating the prefix dominates a cold request: ~50M parameters, F16. */
export const PREFIX_CACHE_MODEL = {
  embedding: 768,
  layers: 8,
  heads: 12,
  kvHeads: 4,
  feedForward: 2048,
  contextLength: 4096,
  type: 'F16',
  seed: 16,
} satisfies LlamaSpecInput;

/** node-llama-cpp in the benchmark's own process, as the floor the engine is measured against: the prebuilt binaries, `threads` of them. */
export async function directLlama(threads: number) {
  const { getLlama } = await loadNodeLlamaCpp();
  return getLlama({ gpu: 'auto', build: 'never', skipDownload: true, usePrebuiltBinaries: true, progressLogs: false, maxThreads: threads });
}

export interface PrefixCacheOptions {
  runs: number;
  prefixTokens: number;
  threads: number;
}

/** A prompt of some `tokens` tokens that shares nothing with another one (it starts with a fresh id). */
function prefixOf(words: number): string {
  return `${newId()} ${'the kiln was warm and the model ran on it all night long '.repeat(Math.ceil(words / 12))}`;
}

export async function prefixCache(o: PrefixCacheOptions) {
  const dir = path.join(DATA_DIR, 'bench', 'models');
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, 'prefix-cache.gguf');
  const written = await writeLlamaGguf(file, { ...PREFIX_CACHE_MODEL, name: 'kiln-prefix-cache' });

  const { LlamaCompletion } = await loadNodeLlamaCpp();
  const llama = await directLlama(o.threads);
  const model = await llama.loadModel({ modelPath: file });
  // Words for about `prefixTokens` tokens: the repeated sentence rounds up to whole sentences.
  const tokensOf = (words: number) => model.tokenizer(prefixOf(words)).length;
  let words = o.prefixTokens;
  while (words > 12 && tokensOf(words) > o.prefixTokens) words -= 12;
  const prefixTokens = tokensOf(words);
  console.log(
    `model: ${(written.size / 2 ** 20).toFixed(0)} MiB, ${(written.parameters / 1e6).toFixed(0)}M parameters, ${PREFIX_CACHE_MODEL.type}; ` +
      `prefix ~${prefixTokens} tokens, then a short question; ${o.threads} thread(s); greedy, 4 tokens`,
  );
  const context = await model.createContext({ sequences: 1, contextSize: PREFIX_CACHE_MODEL.contextLength, threads: o.threads });
  const sequence = context.getSequence();

  const token = await apiToken();
  const ref = await pushGguf(token, { path: file, sha256: written.sha256, size: written.size }, `prefix-cache-${Date.now()}`, {
    contextSize: PREFIX_CACHE_MODEL.contextLength,
    sequences: 2,
  });
  const input = (prefix: string, question: string) => ({
    prompt: `${prefix}\nQ: ${question}\nA:`,
    max_tokens: 4,
    min_tokens: 4,
    temperature: 0,
  });
  const viaApi = async (prefix: string, question: string) => (await streamPrediction(token, ref, input(prefix, question))).ttft;
  const direct = async (seq: LlamaContextSequence, prefix: string, question: string, cold: boolean) => {
    if (cold) await seq.clearHistory();
    const completion = new LlamaCompletion({ contextSequence: seq });
    const t0 = performance.now();
    let first: number | undefined;
    await completion.generateCompletion(input(prefix, question).prompt, {
      maxTokens: 4,
      temperature: 0,
      onToken: () => (first ??= performance.now()),
    });
    completion.dispose({ disposeSequence: false });
    return first! - t0;
  };

  // Warm-up: the model loaded on a node, and both paths past their first call.
  await viaApi(prefixOf(20), 'warm?');
  await direct(sequence, prefixOf(20), 'warm?', true);

  const runs = { api: { cold: [] as number[], cached: [] as number[] }, direct: { cold: [] as number[], cached: [] as number[] } };
  for (let i = 0; i < o.runs; i++) {
    const prefix = prefixOf(words);
    runs.api.cold.push(await viaApi(prefix, 'How hot is the kiln?'));
    runs.api.cached.push(await viaApi(prefix, 'When can we open it?'));
    const other = prefixOf(words);
    runs.direct.cold.push(await direct(sequence, other, 'How hot is the kiln?', true));
    runs.direct.cached.push(await direct(sequence, other, 'When can we open it?', false));
  }
  await context.dispose();
  await model.dispose();
  await llama.dispose();

  const row = (name: string, r: { cold: number[]; cached: number[] }) => {
    const cold = percentile(r.cold, 50);
    const cached = percentile(r.cached, 50);
    return {
      path: name,
      runs: r.cold.length,
      'TTFT cold p50': ms(cold),
      'TTFT cached p50': ms(cached),
      'cold / cached': `${(cold / cached).toFixed(1)}×`,
    };
  };
  const rows = [row('API: create + SSE, prefix cached on the node', runs.api), row('node-llama-cpp direct (floor)', runs.direct)];
  table(`Prefix caching: time to first token after a ~${prefixTokens}-token shared prefix`, rows);
  console.log(`saved ${await saveResult('prefix-cache', { prefixTokens, rows, runs })}`);
}

export const defaultThreads = () => Number(process.env.KILN_ENGINE_THREADS) || defaultEngineThreads();
