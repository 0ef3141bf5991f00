/**
 * Speculative decoding: greedy tokens/s of an F32 model with and without a draft, in Kiln's engine,
 * next to node-llama-cpp directly without a draft (the floor) in the same run. Two drafts: the same
 * weights in Q8_0 (a quarter of the bytes, but on a CPU only about twice as fast), and the target's
 * first block alone in Q8_0 (a small draft of the same family, as a real pair would be). All
 * alternate, so each sees the same machine, and every run's text must be the same.
 */
import { mkdir, rename, stat } from 'node:fs/promises';
import path from 'node:path';
import { textGenerationInput } from '../domain/tasks/text-generation';
import { sourceBuildSetting } from '../engines/llama/backend';
import { LlamaEngine, loadNodeLlamaCpp } from '../engines/llama/engine';
import { type LlamaSpecInput, type TensorType, writeLlamaGguf } from '../tools/gguf/gguf-writer';
import { DATA_DIR, percentile, saveResult, table } from './lib';
import { batchedBench, batchedBenchBinary } from './llama-floor';

/**
 * ~330 MiB in F32: big enough that a decode is mostly spent reading the weights. Calm blocks (a
 * small residual scale): with the writer's default, random weights amplify Q8_0's rounding through
 * the blocks until the copy agrees with the F32 model on ~1 % of tokens (measured). A bigram
 * structure: random weights leave the next token a near tie everywhere, where a trained model is
 * mostly sure of it; with it, the one-block draft picks the target's token too (without, ~60 %).
 */
const SHAPE: LlamaSpecInput = {
  embedding: 768,
  layers: 12,
  heads: 12,
  feedForward: 2048,
  vocabWords: 400,
  contextLength: 2048,
  residualScale: 0.01,
  bigram: 1,
  seed: 1616,
};
const DRAFT_LAYERS = 1;
const PROMPT = 'the river and the old house near the garden';

/** Generated once into the bench cache (not committed): the same seed gives the same weights in each type. */
async function model(type: TensorType, layers = SHAPE.layers!): Promise<string> {
  const dir = path.join(DATA_DIR, 'bench', 'speculative');
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, `target-${SHAPE.embedding}x${layers}-r${SHAPE.residualScale}-b${SHAPE.bigram}-${type}.gguf`);
  if (!(await stat(file).catch(() => undefined))) {
    // Renamed into place once whole: a run stopped halfway leaves no file that looks cached.
    await writeLlamaGguf(`${file}.partial`, { ...SHAPE, layers, type, name: `kiln-speculative-${type}` });
    await rename(`${file}.partial`, file);
  }
  return file;
}

/**
 * What the hardware allows, from llama.cpp's own timings of the same files in this run (its
 * batched bench, one sequence): at full acceptance a cycle drafts K tokens one decode each and
 * checks K + 1 in one target batch, for K + 1 tokens, where plain decoding takes K + 1 target
 * decodes. So speculative decoding gives at most (K + 1) · target ÷ (K · draft + check(K + 1)),
 * whatever drives llama.cpp.
 */
async function llamaCppBound(target: string, draft: string, opts: { draftTokens: number; threads: number; tokens: number }) {
  const bin = batchedBenchBinary();
  const k = opts.draftTokens;
  const median = async (file: string) => {
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push(await batchedBench(bin, file, 1, k + 1, opts.tokens, opts.threads));
    return {
      decodeMs: percentile(
        runs.map((r) => (r.t_tg / r.tg) * 1000),
        50,
      ),
      checkMs: percentile(
        runs.map((r) => r.t_pp * 1000),
        50,
      ),
    };
  };
  const t = await median(target);
  const d = await median(draft);
  const bound = ((k + 1) * t.decodeMs) / (k * d.decodeMs + t.checkMs);
  console.log(
    `llama.cpp alone (${bin}, median of 3): F32 target ${t.decodeMs.toFixed(2)} ms a token (${(1000 / t.decodeMs).toFixed(1)} tokens/s), ` +
      `Q8_0 copy ${d.decodeMs.toFixed(2)} ms (${(d.decodeMs / t.decodeMs).toFixed(2)} of the target's), the target's check of ${k + 1} tokens ${t.checkMs.toFixed(1)} ms: ` +
      `the Q8_0 copy can give at most ${bound.toFixed(2)}× at ${k} draft tokens`,
  );
  return { targetDecodeMs: t.decodeMs, draftDecodeMs: d.decodeMs, checkMs: t.checkMs, bound };
}

interface Run {
  text: string;
  tokensPerSecond: number;
  accepted?: number;
  rejected?: number;
}

export async function speculative(opts: { tokens: number; runs: number; threads: number; draftTokens: number; minDraftTokens: number }) {
  const [target, draft, small] = [await model('F32'), await model('Q8_0'), await model('Q8_0', DRAFT_LAYERS)];
  const settings = { contextSize: 1024, sequences: 1 };
  const engine = new LlamaEngine({ gpu: 'auto', contextSize: 1024, sequences: 1, threads: opts.threads });
  await engine.load('plain', target, settings);
  const speculative = { type: 'draft' as const, maxDraftTokens: opts.draftTokens, minDraftTokens: opts.minDraftTokens, minConfidence: 0 };
  await engine.load('draft', target, { ...settings, speculative: { ...speculative, model: 'bench/q8', version: 'q8' } }, draft);
  await engine.load('small', target, { ...settings, speculative: { ...speculative, model: 'bench/small', version: 'small' } }, small);
  const input = textGenerationInput.parse({ prompt: PROMPT, max_tokens: opts.tokens, temperature: 0, top_k: 1, seed: 1 });

  // The floor: node-llama-cpp as a program would use it, one sequence, no predictor.
  const { LlamaCompletion } = await loadNodeLlamaCpp();
  const llama = await engine.backend();
  const floorModel = await llama.loadModel({ modelPath: target });
  const floorContext = await floorModel.createContext({ contextSize: 1024, sequences: 1, threads: opts.threads });
  const floorSequence = floorContext.getSequence();
  async function floorOnce(): Promise<Run> {
    await floorSequence.clearHistory();
    const completion = new LlamaCompletion({ contextSequence: floorSequence });
    let tokens = 0;
    const t0 = performance.now();
    const text = await completion.generateCompletion(PROMPT, {
      maxTokens: opts.tokens,
      temperature: 0,
      topK: 1,
      seed: 1,
      repeatPenalty: false,
      onToken: (t) => void (tokens += t.length),
    });
    const seconds = (performance.now() - t0) / 1000;
    completion.dispose({ disposeSequence: false });
    return { text, tokensPerSecond: tokens / seconds };
  }
  async function engineOnce(version: string): Promise<Run> {
    const g = await engine.generate(version, input);
    return {
      text: g.chunks.join(''),
      tokensPerSecond: g.outputTokens / g.predictSeconds,
      accepted: g.draft?.accepted,
      rejected: g.draft?.rejected,
    };
  }

  // One warm-up each: the first decode of a model pays for paging its weights in.
  await floorOnce();
  await engineOnce('plain');
  await engineOnce('draft');
  await engineOnce('small');
  const runs: Record<'floor' | 'plain' | 'draft' | 'small', Run[]> = { floor: [], plain: [], draft: [], small: [] };
  for (let i = 0; i < opts.runs; i++) {
    runs.floor.push(await floorOnce());
    runs.plain.push(await engineOnce('plain'));
    runs.draft.push(await engineOnce('draft'));
    runs.small.push(await engineOnce('small'));
  }
  const tps = (r: Run[]) =>
    percentile(
      r.map((x) => x.tokensPerSecond),
      50,
    );
  const floor = tps(runs.floor);
  const texts = new Set(Object.values(runs).flatMap((r) => r.map((x) => x.text)));
  const acceptance = (r: Run[]) => {
    const accepted = r.reduce((n, x) => n + (x.accepted ?? 0), 0);
    const all = accepted + r.reduce((n, x) => n + (x.rejected ?? 0), 0);
    return { 'draft acceptance': `${((100 * accepted) / Math.max(1, all)).toFixed(0)}% of ${all}` };
  };
  const row = (name: string, r: Run[], extra: Record<string, string | number> = {}) => ({
    path: name,
    'tokens/s p50': Number(tps(r).toFixed(1)),
    '× floor': Number((tps(r) / floor).toFixed(2)),
    ...extra,
  });
  const rows = [
    row('node-llama-cpp direct, no draft (floor)', runs.floor),
    row('Kiln engine, no draft', runs.plain),
    row(`Kiln engine, Q8_0 copy as draft (${(await stat(draft)).size >> 20} MiB)`, runs.draft, acceptance(runs.draft)),
    row(`Kiln engine, ${DRAFT_LAYERS}-block Q8_0 draft (${(await stat(small)).size >> 20} MiB)`, runs.small, acceptance(runs.small)),
  ];
  console.log(`llama.cpp: ${engine.binary} (KILN_LLAMA_SOURCE_BUILD=${sourceBuildSetting()})`);
  table(
    `Speculative decoding: ${opts.tokens} greedy tokens, ${(await stat(target)).size >> 20} MiB F32 target (${SHAPE.layers} blocks), draft tokens ${opts.draftTokens} (min ${opts.minDraftTokens}), ${opts.threads} thread(s), median of ${opts.runs}`,
    rows,
  );
  const speedup = tps(runs.draft) / tps(runs.plain);
  const smallSpeedup = tps(runs.small) / tps(runs.plain);
  console.log(
    `with draft / without: Q8_0 copy ${speedup.toFixed(2)}×, ${DRAFT_LAYERS}-block draft ${smallSpeedup.toFixed(2)}× (target ≥ 1.5×); greedy output identical in all ${4 * opts.runs} runs: ${texts.size === 1 ? 'yes' : `NO (${texts.size} different texts)`}`,
  );
  const bound = await llamaCppBound(target, draft, opts);
  const file = await saveResult('speculative', { opts, shape: SHAPE, rows, speedup, smallSpeedup, identical: texts.size === 1, bound });
  console.log(`saved ${file}`);
  await floorContext.dispose();
  await floorModel.dispose();
  await engine.dispose();
  if (texts.size !== 1) process.exitCode = 1;
}
