/**
 * Batched generation against its floor, in one run: llama.cpp's own `llama-batched-bench` (built
 * from the llama.cpp source node-llama-cpp ships, by infra/llama-batched-bench.sh) at N sequences,
 * next to Kiln's engine driven directly (LlamaEngine in this process) and Kiln through the API with
 * N concurrent SSE streams, on the same generated model with the same thread count. Each figure is
 * generated tokens ÷ total time (prompt included), as llama-batched-bench counts it, and every
 * stream's prompt is evaluated in full, as llama-batched-bench's are (none is found cached); for
 * each N the three run one after the other, so they share the machine's load of the moment.
 *
 * Beside it, time to first token for a long prompt (issue 19: ≤ 1.2× llama.cpp's prompt time): the
 * floor is llama-batched-bench's prompt time (t_pp) for the same token count at one sequence.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { textGenerationInput } from '../domain/tasks/text-generation';
import { cpuHost, sourceBuildSetting } from '../engines/llama/backend';
import { LlamaEngine } from '../engines/llama/engine';
import { MIN_REUSED_TOKENS } from '../engines/llama/sequence-pool';
import { stateFileOf } from '../lib/ready';
import { type LlamaSpecInput, writeLlamaGguf } from '../tools/gguf/gguf-writer';
import { cpuBetween, cpuByProcess } from './cpu';
import { apiToken, call, DATA_DIR, percentile, pushGguf, saveResult, streamPrediction, table } from './lib';
import { batchedBench, batchedBenchBinary } from './llama-floor';

/** The prompts' text: the generated vocabulary's words, which tokenize one token a character. */
const FILLER = 'the kiln was warm and the model ran on it all night long ';

/** Tokens generated after the time-to-first-token prompt: the first is what is timed. */
const TTFT_TOKENS = 4;

/** issue: the 226M-parameter F16 model of issue 19; small: a 4-layer one for a loaded machine. */
export const BATCHING_MODELS = {
  '226m': { embedding: 1024, layers: 20, heads: 16, kvHeads: 4, feedForward: 2816, contextLength: 2048, type: 'F16', seed: 19 },
  small: { embedding: 512, layers: 4, heads: 8, kvHeads: 4, feedForward: 1408, contextLength: 2048, type: 'F16', seed: 19 },
} satisfies Record<string, LlamaSpecInput>;

export interface BatchingOptions {
  model: keyof typeof BATCHING_MODELS;
  sequences: number[];
  tokens: number;
  promptTokens: number;
  rounds: number;
  /** The engine's threads, in this process (direct); the API's engine worker has its own KILN_ENGINE_THREADS. */
  threads: number;
  /** llama-batched-bench's threads: all cores, the floor issue 31 measures against. */
  floorThreads: number;
  skipApi: boolean;
  /** Prompt length of the time-to-first-token table; 0 skips it. */
  ttftPromptTokens: number;
}

/**
 * The engine's llama.cpp built from the same source with the same CPU options as the floor
 * (infra/llama-addon-build.sh, once), so the two differ only in how they drive it; the engine
 * worker of the API finds it too. KILN_LLAMA_SOURCE_BUILD=false measures the prebuilt instead; a GPU
 * host runs its own build (infra/gpu-install.sh).
 */
function ensureSourceBuild(): void {
  if (sourceBuildSetting() === 'false' || !cpuHost('auto')) return;
  const script = path.resolve(__dirname, '../infra/llama-addon-build.sh');
  execFileSync('bash', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/** llama.cpp's aggregate: N sequences of `prompt` tokens each, then `tokens` decoded for all N at once. */
async function floorOnce(bin: string, file: string, n: number, o: BatchingOptions): Promise<number> {
  const r = await batchedBench(bin, file, n, o.promptTokens, o.tokens, o.floorThreads);
  return (r.pl * r.tg) / r.t;
}

/** llama.cpp's prompt time in ms for one sequence of `prompt` tokens: the floor of time to first token. */
async function promptFloorMs(bin: string, file: string, prompt: number, threads: number): Promise<number> {
  return (await batchedBench(bin, file, 1, prompt, 1, threads)).t_pp * 1000;
}

/**
 * A prompt of `tokens` tokens, the beginning-of-text token included: the generated vocabulary has
 * whole words but not the pieces that build up to them, so text tokenizes one token a character.
 */
function promptOf(tokens: number): string {
  return FILLER.repeat(Math.ceil(tokens / 50)).slice(0, Math.max(1, tokens - 1));
}

/**
 * A prompt of exactly `tokens` tokens for the model's tokenizer (counted by the engine, as it counts
 * a request's input), which begins with a word of its own: the engine reuses a sequence's evaluated
 * prefix of 16 tokens or more within an account (sequence-pool.ts), and one token a character, a
 * fresh 8-character first word leaves no two prompts sharing more than 8, so every prompt is timed
 * cold, as llama.cpp's is.
 */
function coldPrompt(engine: LlamaEngine, version: string, tokens: number): string {
  const head = `q${randomBytes(6)
    .toString('base64url')
    .replace(/[^a-z0-9]/gi, 'x')
    .slice(0, 7)} `;
  const body = FILLER.repeat(Math.ceil((tokens * 2) / 50));
  let chars = tokens;
  for (let i = 0; i < 20; i++) {
    const text = head + body.slice(0, Math.max(0, chars - head.length));
    const count = engine.tokenCount(version, text);
    if (count === tokens) return text;
    chars += tokens - count;
  }
  throw new Error(`no prompt of ${tokens} tokens found`);
}

/** Which llama.cpp the bench stack's engine worker runs, and on how many threads (workers/engine-worker.ts says). */
function apiEngineLlama(): { binary: string; threads: number } | undefined {
  try {
    const s = JSON.parse(readFileSync(stateFileOf(path.join(DATA_DIR, 'pids', 'engine-worker.ready'), 'llama'), 'utf8')) as {
      binary: string;
      threads: number;
    };
    return { binary: s.binary.startsWith('source build') ? 'source build' : s.binary, threads: s.threads };
  } catch {
    return undefined;
  }
}

/** Read after the timing: every stream's prompt was evaluated in full, none found in a sequence. */
async function expectCold(token: string, streams: Array<{ id: string }>): Promise<void> {
  for (const { id } of streams) {
    const { metrics } = await call(token, `/v1/predictions/${id}`);
    if (metrics?.cached_tokens >= MIN_REUSED_TOKENS)
      throw new Error(`API stream ${id} found ${metrics.cached_tokens} prompt tokens cached`);
  }
}

/** Each component's CPU over a run, in ms per generated token: where the stack's share of the cores goes. */
function cpuPerToken(cpu: Record<string, number>, tokens: number): string {
  return Object.entries(cpu)
    .filter(([, seconds]) => seconds > 0)
    .map(([component, seconds]) => `${component} ${((seconds * 1000) / tokens).toFixed(2)}`)
    .join(', ');
}

/**
 * When the API run's streams began and ended, from its start: the time the engine decodes fewer
 * than N sequences at once (the creates coming in one after another, the streams ending) is the
 * spread of each.
 */
function spans(streams: Array<{ ttft: number; total: number }>): string {
  const range = (xs: number[]) => `${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)} ms`;
  return `first tokens at ${range(streams.map((s) => s.ttft))}, last tokens at ${range(streams.map((s) => s.total))}`;
}

/** Aggregate generated tokens/s of `n` calls at once, the i-th given the i-th of `prompts`. */
async function timed(tokens: number, prompts: string[], one: (prompt: string) => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await Promise.all(prompts.map(one));
  return (prompts.length * tokens) / ((performance.now() - t0) / 1000);
}

export async function batching(o: BatchingOptions) {
  const bin = batchedBenchBinary();
  ensureSourceBuild();
  const spec = BATCHING_MODELS[o.model];
  const dir = path.join(DATA_DIR, 'bench', 'models');
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, `batching-${o.model}.gguf`);
  const written = await writeLlamaGguf(file, { ...spec, name: `kiln-batching-${o.model}` });
  const maxN = Math.max(...o.sequences);
  // Every sequence holds its prompt and its tokens; the context is per sequence, in 256s.
  // The time-to-first-token prompt must fit too, with room to spare. (Before b1d9392 the engine's
  // completion cut the beginning off a prompt over nine tenths of the context: a 1,000-token prompt
  // in a 1,024 context found 921 tokens cached, its fresh first word gone.)
  const ttftContext = o.ttftPromptTokens > 0 ? Math.ceil(o.ttftPromptTokens / 0.85) + TTFT_TOKENS : 0;
  const contextSize = Math.max(256, Math.ceil((Math.max(o.promptTokens + o.tokens, ttftContext) + 8) / 256) * 256);
  const prompt = promptOf(o.promptTokens);
  const input = { prompt, max_tokens: o.tokens, min_tokens: o.tokens, temperature: 0 };
  console.log(
    `model ${o.model}: ${(written.size / 2 ** 20).toFixed(0)} MiB, ${(written.parameters / 1e6).toFixed(0)}M parameters, ` +
      `${spec.type}; ${o.tokens} tokens per stream after a ~${o.promptTokens}-token prompt; greedy; ` +
      `threads: llama.cpp ${o.floorThreads}, engine direct ${o.threads}`,
  );
  console.log(
    `floor: ${bin}; load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );

  const engine = new LlamaEngine({ gpu: 'auto', contextSize, sequences: maxN, threads: o.threads });
  await engine.load('direct', file, { sequences: maxN, contextSize });
  console.log(`engine backend: ${(await engine.gpu()) ?? 'cpu'}, ${engine.binary} (KILN_LLAMA_SOURCE_BUILD=${sourceBuildSetting()})`);
  // Every stream's prompt is one no earlier one shares 16 tokens with, so Kiln evaluates each in
  // full, as llama-batched-bench does: with one prompt for all, every round after the first found
  // it in the sequences and skipped the prompt the floor's time includes.
  const direct = async (prompt: string) => {
    const res = await engine.generate('direct', textGenerationInput.parse({ ...input, prompt }));
    if (res.cachedTokens >= MIN_REUSED_TOKENS) throw new Error(`a direct stream found ${res.cachedTokens} prompt tokens cached`);
    return res;
  };
  const coldPrompts = (n: number) => Array.from({ length: n }, () => coldPrompt(engine, 'direct', o.promptTokens));
  const check = await engine.generate('direct', textGenerationInput.parse(input));
  console.log(`direct: ${check.inputTokens} prompt tokens, ${check.outputTokens} generated`);

  let token: string | undefined;
  let model: string | undefined;
  let apiEngine: { binary: string; threads: number } | undefined;
  if (!o.skipApi) {
    token = await apiToken();
    model = await pushGguf(
      token,
      { path: file, sha256: written.sha256, size: (await stat(file)).size },
      `batching-${o.model}-${Date.now().toString(36)}`,
      {
        sequences: maxN,
        contextSize,
      },
    );
    // Loads it on a node (cold start), and checks that it generates what is asked.
    const warm = await call(token, `/v1/models/${model}/predictions`, { input }, { prefer: 'wait=60' });
    if (warm.status !== 'succeeded') throw new Error(`warm-up prediction ${warm.id}: ${warm.status} ${warm.error ?? ''}`);
    apiEngine = apiEngineLlama();
    console.log(
      `API: ${model} on ${warm.metrics?.output_token_count} tokens per stream, ${warm.metrics?.tokens_per_second} tokens/s alone; ` +
        `its engine runs llama.cpp ${apiEngine?.binary ?? '(unknown)'} on ${apiEngine?.threads ?? '?'} thread(s)`,
    );
  }

  const rounds = new Map<number, { floor: number[]; direct: number[]; api: number[] }>(
    o.sequences.map((n) => [n, { floor: [], direct: [], api: [] }]),
  );
  for (let r = 0; r < o.rounds; r++) {
    for (const n of o.sequences) {
      const at = rounds.get(n)!;
      at.floor.push(await floorOnce(bin, file, n, o));
      at.direct.push(await timed(o.tokens, coldPrompts(n), direct));
      const prompts = coldPrompts(n);
      const cpuBefore = cpuByProcess();
      const streams: Array<{ id: string; ttft: number; total: number }> = [];
      if (token && model)
        at.api.push(
          await timed(o.tokens, prompts, async (prompt) => streams.push(await streamPrediction(token!, model!, { ...input, prompt }))),
        );
      const f = (xs: number[]) => (xs.length ? xs.at(-1)!.toFixed(1) : '-');
      console.log(`round ${r + 1}, ${n} streams: llama.cpp ${f(at.floor)}, direct ${f(at.direct)}, API ${f(at.api)} tokens/s`);
      if (token && model) {
        console.log(`  the API run's CPU, ms per generated token: ${cpuPerToken(cpuBetween(cpuBefore, cpuByProcess()), n * o.tokens)}`);
        console.log(`  ${spans(streams)}`);
        await expectCold(token, streams);
      }
    }
  }

  // Time to first token, cold: a fresh prompt each time (see coldPrompt); one unmeasured warm-up each
  // side first, as llama-batched-bench warms up before it times.
  const ttft = { floor: [] as number[], direct: [] as number[], api: [] as number[], cached: [] as number[], apiCached: [] as number[] };
  if (o.ttftPromptTokens > 0) {
    const ttftInput = (prompt: string) => ({ prompt, max_tokens: TTFT_TOKENS, temperature: 0 });
    const directTtft = async () => {
      const t0 = performance.now();
      let first: number | undefined;
      const res = await engine.generate('direct', textGenerationInput.parse(ttftInput(coldPrompt(engine, 'direct', o.ttftPromptTokens))), {
        onChunk: () => (first ??= performance.now()),
      });
      if (res.inputTokens !== o.ttftPromptTokens) throw new Error(`TTFT prompt of ${res.inputTokens} tokens, not ${o.ttftPromptTokens}`);
      ttft.cached.push(res.cachedTokens);
      if (res.cachedTokens >= MIN_REUSED_TOKENS) throw new Error(`TTFT prompt found ${res.cachedTokens} tokens cached: not a cold prompt`);
      return first! - t0;
    };
    const apiTtft = async () => {
      const p = await streamPrediction(token!, model!, ttftInput(coldPrompt(engine, 'direct', o.ttftPromptTokens)));
      // The node's figures, read after the timing: the same prompt length, and nothing reused.
      const { metrics } = await call(token!, `/v1/predictions/${p.id}`);
      if (metrics?.input_token_count !== o.ttftPromptTokens)
        throw new Error(`API TTFT prompt of ${metrics?.input_token_count} tokens, not ${o.ttftPromptTokens}`);
      ttft.apiCached.push(metrics.cached_tokens);
      if (metrics.cached_tokens >= MIN_REUSED_TOKENS)
        throw new Error(`API TTFT prompt found ${metrics.cached_tokens} tokens cached: not a cold prompt`);
      return p.ttft;
    };
    await directTtft();
    if (token && model) await apiTtft();
    ttft.cached.length = 0;
    ttft.apiCached.length = 0;
    for (let r = 0; r < o.rounds; r++) {
      ttft.floor.push(await promptFloorMs(bin, file, o.ttftPromptTokens, o.floorThreads));
      ttft.direct.push(await directTtft());
      if (token && model) ttft.api.push(await apiTtft());
      const f = (xs: number[]) => (xs.length ? `${xs.at(-1)!.toFixed(0)} ms` : '-');
      console.log(
        `round ${r + 1}, TTFT of ${o.ttftPromptTokens} tokens: llama.cpp prompt ${f(ttft.floor)}, direct ${f(ttft.direct)}, API ${f(ttft.api)}`,
      );
    }
  }
  const binary = engine.binary;
  await engine.dispose();

  const ratio = (a: number, b: number) => (Number.isFinite(a) ? `${(a / b).toFixed(2)}×` : '-');
  const rows = o.sequences.map((n) => {
    const at = rounds.get(n)!;
    const [floor, eng, api] = [percentile(at.floor, 50), percentile(at.direct, 50), percentile(at.api, 50)];
    return {
      streams: n,
      rounds: at.floor.length,
      'llama.cpp tok/s (floor)': Number(floor.toFixed(1)),
      'engine direct tok/s': Number(eng.toFixed(1)),
      'direct ÷ floor': ratio(eng, floor),
      'API tok/s': Number.isFinite(api) ? Number(api.toFixed(1)) : '-',
      'API ÷ floor': ratio(api, floor),
      target: '≥ 0.85×',
    };
  });
  table(
    `Batching: aggregate generated tokens/s at N streams (model ${o.model}, ${o.tokens} tokens each, p50 of rounds; ` +
      `llama.cpp on ${o.floorThreads} thread(s), the API's engine ${apiEngine ? `${apiEngine.binary} on ${apiEngine.threads}` : '-'})`,
    rows,
  );
  const ttftRows: Array<Record<string, string | number>> = [];
  if (o.ttftPromptTokens > 0) {
    const floor = percentile(ttft.floor, 50);
    for (const [via, xs] of [
      ['engine direct', ttft.direct],
      ['API (SSE)', ttft.api],
    ] as const) {
      const v = percentile(xs, 50);
      if (!Number.isFinite(v)) continue;
      ttftRows.push({
        path: via,
        rounds: xs.length,
        'prompt tokens': o.ttftPromptTokens,
        'TTFT ms': Number(v.toFixed(1)),
        'llama.cpp prompt ms (floor)': Number(floor.toFixed(1)),
        'TTFT ÷ floor': `${(v / floor).toFixed(2)}×`,
        target: '≤ 1.2×',
      });
    }
    table(
      `Time to first token, cold ${o.ttftPromptTokens}-token prompt, 1 stream (p50 of rounds; prompt tokens found cached: direct ${ttft.cached.join(', ')}, API ${ttft.apiCached.join(', ') || '-'})`,
      ttftRows,
    );
  }
  const load = os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  console.log(`load average at the end: ${load}`);
  console.log(
    `saved ${await saveResult('batching', { model: o.model, spec, threads: o.threads, floorThreads: o.floorThreads, apiEngine, tokens: o.tokens, host: os.hostname(), binary, load, rows, rounds: [...rounds], ttft: { promptTokens: o.ttftPromptTokens, rows: ttftRows, ...ttft } })}`,
  );
}
