/** The result of a generation, built in one place whichever way the generation ended. */
import type { KvRestore } from './kv-snapshots';
import type { DraftCounts } from './speculative';

/**
 * Where a generation's cached prompt tokens came from: a sequence that still held them, a KV
 * snapshot on this node's disk, one downloaded from object storage, or nowhere.
 */
export type CacheTier = 'live' | 'disk' | 'object' | 'none';

/** The tier a generation's cached tokens came from. */
export function cacheTierOf(cachedTokens: number, restored?: Pick<KvRestore, 'tier'>): CacheTier {
  if (restored) return restored.tier;
  return cachedTokens > 0 ? 'live' : 'none';
}

export interface GenerationResult {
  chunks: string[];
  inputTokens: number;
  /** Tokens of the output, the continued text's included. */
  outputTokens: number;
  /** Tokens of the text this generation continued (0 for a fresh one). */
  continuedTokens: number;
  /** Prompt tokens whose evaluation the sequence already held (prefix reuse), not evaluated again. */
  cachedTokens: number;
  /** Where the cached tokens came from. */
  cacheTier: CacheTier;
  /** Of those, the ones restored from a KV snapshot (on disk or in object storage), and how long the restore took. */
  restored?: KvRestore;
  aborted: boolean;
  stopReason: string;
  seed: number;
  /** Seconds from the start of generation to the first chunk. */
  timeToFirstToken: number | null;
  predictSeconds: number;
  /** Draft tokens accepted and rejected, where the version decodes speculatively. */
  draft?: DraftCounts;
  /** How a continued generation resumed the failed attempt's decoding exactly (./exact-decoding.ts). */
  resumed?: ExactResume;
  /** KV checkpoints saved while it generated, and the seconds they took. */
  checkpoints?: { saved: number; seconds: number };
}

/**
 * Where an exact continuation started decoding again: from a KV checkpoint (its tier and how many
 * generated tokens it held) or from the prompt, prefilled again (no checkpoint was usable); and
 * how many already streamed tokens were drawn again and not streamed twice.
 */
export interface ExactResume {
  from: 'checkpoint' | 'prefill';
  tier?: 'disk' | 'object';
  atToken: number;
  seconds: number;
  redrawn: number;
  /** Whether the tokens drawn again gave the streamed text. */
  matched: boolean;
}

/** How a generation ended, with its timings. */
export interface GenerationEnding {
  aborted: boolean;
  stopReason: string;
  timeToFirstToken: number | null;
  predictSeconds: number;
  draft?: DraftCounts;
}

/** What a generation produced, and how it ended. */
export interface GenerationRun {
  output: {
    chunks: string[];
    outputTokens: number;
    cachedTokens: number;
    restored?: KvRestore;
    resumed?: ExactResume;
    checkpoints?: { saved: number; seconds: number };
  };
  ending: GenerationEnding;
}

/** A generation's output, with what it restored, resumed from and checkpointed only where there was any. */
export function generationOutput(parts: {
  chunks: string[];
  outputTokens: number;
  cachedTokens?: number;
  restored?: KvRestore;
  resumed?: ExactResume;
  checkpoints: { saved: number; seconds: number };
}): GenerationRun['output'] {
  const { chunks, outputTokens, restored, resumed, checkpoints } = parts;
  return {
    chunks,
    outputTokens,
    cachedTokens: parts.cachedTokens ?? 0,
    ...(resumed ? { resumed } : {}),
    ...(checkpoints.saved > 0 ? { checkpoints } : {}),
    ...(restored ? { restored } : {}),
  };
}

/** Times are performance.now() readings, in milliseconds. */
interface RunTimes {
  started: number;
  ended: number;
}

/** The continued text fills max_tokens already: nothing is generated, and no sequence is taken. */
export function nothingToGenerate(continuedTokens: number): GenerationRun {
  return {
    output: { chunks: [], outputTokens: continuedTokens, cachedTokens: 0 },
    ending: { aborted: false, stopReason: 'maxTokens', timeToFirstToken: null, predictSeconds: 0 },
  };
}

/**
 * llama.cpp's generation returned with `stopReason`. A stop string ends it as 'stop', unless the
 * caller canceled it: then it is an abort with llama.cpp's own reason.
 */
export function endedByDecoding(
  run: RunTimes & { stopReason: string; atStopString: boolean; canceled: boolean; firstChunkAt: number | null; draft?: DraftCounts },
): GenerationEnding {
  return {
    aborted: run.canceled,
    stopReason: run.atStopString && !run.canceled ? 'stop' : run.stopReason,
    timeToFirstToken: run.firstChunkAt === null ? null : (run.firstChunkAt - run.started) / 1000,
    predictSeconds: (run.ended - run.started) / 1000,
    ...(run.draft ? { draft: run.draft } : {}),
  };
}

/**
 * llama.cpp's generation threw after an abort (node-llama-cpp throws where a call is aborted
 * before its first token), by the caller ('abort') or by a stop string ('stop').
 */
export function endedByEarlyAbort(run: RunTimes & { canceled: boolean }): GenerationEnding {
  return {
    aborted: run.canceled,
    stopReason: run.canceled ? 'abort' : 'stop',
    timeToFirstToken: null,
    predictSeconds: (run.ended - run.started) / 1000,
  };
}

export function generationResult(
  counts: { inputTokens: number; continuedTokens: number; seed: number },
  { output, ending }: GenerationRun,
): GenerationResult {
  return {
    chunks: output.chunks,
    inputTokens: counts.inputTokens,
    outputTokens: output.outputTokens,
    continuedTokens: counts.continuedTokens,
    cachedTokens: output.cachedTokens,
    cacheTier: cacheTierOf(output.cachedTokens, output.restored),
    ...(output.restored ? { restored: output.restored } : {}),
    aborted: ending.aborted,
    stopReason: ending.stopReason,
    seed: counts.seed,
    timeToFirstToken: ending.timeToFirstToken,
    predictSeconds: ending.predictSeconds,
    ...(ending.draft ? { draft: ending.draft } : {}),
    ...(output.resumed ? { resumed: output.resumed } : {}),
    ...(output.checkpoints ? { checkpoints: output.checkpoints } : {}),
  };
}
