/**
 * llama.cpp through node-llama-cpp. One context per loaded version with N sequences, so N
 * predictions on the same model run at once (continuous batching). CUDA is used when the host
 * has it; llama.cpp is never built or downloaded at run time (which binary: ./llama-backend.ts).
 */
import { existsSync } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import type {
  Llama,
  LlamaContext,
  LlamaContextSequence,
  LlamaEmbeddingContext,
  LlamaGrammar,
  LlamaModel,
  LlamaText,
  Token,
} from 'node-llama-cpp';
import type { NodeLoad } from '../../domain/prefill-split';
import { type SpeculativeSettings } from '../../domain/speculative-settings';
import type { JsonSchema } from '../../domain/tasks/json-schema';
import type { TextGenerationInput } from '../../domain/tasks/text-generation';
import type { GpuState } from '../../lib/hardware';
import { l2Normalize } from '../../lib/vectors';
import { EngineError } from '../engine-error';
import { loadLlamaBackend, type SourceBuildSetting } from './backend';
import { type ChatEndings, chatEndings, StartTrim } from './chat-endings';
import { chatWrapperOf } from './chat-template';
import { DecodeGatherer } from './decode-gatherer';
import { checkpointDueAfterMs, checkpointStart, decodeExactly, decodesExactly, generationKey } from './exact-decoding';
import { type GenerationPrompt, generationPrompt, reuseProbe } from './generation-prompt';
import {
  type CacheTier,
  cacheTierOf,
  type ExactResume,
  endedByDecoding,
  endedByEarlyAbort,
  type GenerationEnding,
  type GenerationResult,
  type GenerationRun,
  generationOutput,
  generationResult,
  nothingToGenerate,
} from './generation-result';
import { GenerationStream } from './generation-stream';
import { GrammarCache, grammarKey, jsonSchemaGrammar } from './grammar';
import type { KvSnapshotEntry } from './kv-object-tier';
import type { KvSnapshotStore } from './kv-snapshots';
import { PrefillTurns } from './prefill-turns';
import { cachedPromptTokens } from './prefix-reuse';
import { evaluatePromptButLast } from './prompt-evaluation';
import { samplingOptions } from './sampling-options';
import { type Decoding, decode } from './sequence-decoding';
import { SequencePool, sharedPrefix } from './sequence-pool';
import { draftCounts, SpeculativeDecoding } from './speculative';
import { stopStringsOf } from './stop-strings';
import { cleanText } from './text';
import { releaseThreadsAtOnce } from './thread-release';
import { tokenBiasPolicy } from './token-bias-policy';
import { contextLimits, type TokenLimits, tokensLeft } from './token-budget';

type NodeLlamaCpp = typeof import('node-llama-cpp');

// node-llama-cpp is ESM with top-level await: it can only be reached through a real import().
let nodeLlamaCpp: Promise<NodeLlamaCpp> | undefined;
export function loadNodeLlamaCpp(): Promise<NodeLlamaCpp> {
  nodeLlamaCpp ??= import('node-llama-cpp');
  return nodeLlamaCpp;
}

/** Metadata llama.cpp asserts on: a file without it would abort the process instead of failing. */
const REQUIRED_LLAMA_KEYS = ['context_length', 'embedding_length', 'block_count', 'feed_forward_length', 'attention.head_count'] as const;

/** Magic, version and counts: readGgufFileInfo can wait forever on a file that is not GGUF at all. */
async function checkGgufHeader(file: string): Promise<void> {
  const handle = await open(file, 'r');
  try {
    const header = Buffer.alloc(24);
    const { bytesRead } = await handle.read(header, 0, 24, 0);
    const { size } = await handle.stat();
    const problem =
      bytesRead < 24 || header.toString('latin1', 0, 4) !== 'GGUF'
        ? 'does not start with the GGUF magic'
        : ![2, 3].includes(header.readUInt32LE(4))
          ? `has unsupported GGUF version ${header.readUInt32LE(4)}`
          : header.readBigUInt64LE(8) > BigInt(size) || header.readBigUInt64LE(16) > BigInt(size)
            ? 'has tensor or metadata counts larger than the file'
            : undefined;
    if (problem) throw new EngineError('ModelFileCorrupt', `not a GGUF model: the file ${problem}`);
  } finally {
    await handle.close();
  }
}

export async function validateGguf(file: string): Promise<{ architecture: string; trainContextSize?: number }> {
  await checkGgufHeader(file);
  const { readGgufFileInfo } = await loadNodeLlamaCpp();
  let info;
  try {
    info = await readGgufFileInfo(file, { readTensorInfo: false, logWarnings: false, signal: AbortSignal.timeout(30_000) });
  } catch (err) {
    throw new EngineError('ModelFileCorrupt', `not a readable GGUF file: ${(err as Error).message}`, { cause: err });
  }
  const architecture = info.metadata?.general?.architecture as string | undefined;
  if (!architecture) throw new EngineError('ModelFileCorrupt', 'GGUF metadata has no general.architecture');
  const arch = (info.architectureMetadata ?? {}) as Record<string, unknown>;
  const missing = REQUIRED_LLAMA_KEYS.filter((key) => {
    const value = key.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], arch);
    return value === undefined;
  });
  if (missing.length > 0) {
    throw new EngineError('ModelFileCorrupt', `GGUF metadata lacks ${missing.map((k) => `${architecture}.${k}`).join(', ')}`);
  }
  return { architecture, trainContextSize: arch.context_length as number | undefined };
}

interface LoadedModel {
  model: LlamaModel;
  /** KV snapshots being saved from this context's sequences. */
  saving: Set<Promise<void>>;
  /** A LoRA adapter version: its context is on this base version's model, which it does not own. */
  base?: string;
  context: LlamaContext;
  pool: SequencePool;
  gatherer: DecodeGatherer;
  embedding?: Promise<LlamaEmbeddingContext>;
  speculative?: SpeculativeDecoding;
}

export type { GenerationResult } from './generation-result';

/** Bytes of f16 keys and values one token takes in the KV cache, from the model's shape. */
function kvBytesPerToken(model: LlamaModel): number {
  const arch = (model.fileInfo.architectureMetadata ?? {}) as {
    block_count?: number;
    embedding_length?: number;
    attention?: { head_count?: number; head_count_kv?: number };
  };
  const { block_count: layers = 0, embedding_length: embedding = 0 } = arch;
  const heads = arch.attention?.head_count ?? 1;
  const kvHeads = arch.attention?.head_count_kv ?? heads;
  return layers * 2 * (embedding / heads) * kvHeads * 2;
}

/**
 * How long a gathered decode waits for a sequence of the last batch that has not asked again: the
 * JS between a token's sampling and the next decode request takes well under this; a sequence
 * that is done calls leave(), so this only bounds the odd case (a stop string, an abort).
 */
const GATHER_WAIT_MS = 5;

/** The longest embedding context, in tokens (the version's context caps it too). */
const EMBEDDING_CONTEXT_MAX = 2048;

export interface LlamaEngineOptions {
  gpu: 'auto' | 'false' | 'cuda' | 'vulkan' | 'metal';
  contextSize: number;
  sequences: number;
  threads: number;
  /**
   * Test fixtures on: a version's `fixtureTokenDelayMs` setting holds every decode of its context
   * for that long, so tests pace generation themselves instead of depending on the machine's speed.
   */
  fixtures?: boolean;
  /** KILN_LLAMA_SOURCE_BUILD: when to run the CPU build from source (./llama-backend.ts). */
  sourceBuild?: SourceBuildSetting;
  /** A source-built addon folder to load instead of choosing a build (./backend.ts). */
  addonDir?: string;
  /** KV snapshots on disk: long prompts' evaluated state, kept across restarts and unloads (absent: none kept). */
  snapshots?: KvSnapshotStore;
  /** Told which llama.cpp binary runs, once it is loaded (the engine worker logs it). */
  onBackend?: (backend: { binary: string; fallback?: string; hint?: string; gpu: string | false }) => void;
}

/** Engine settings a version may carry (from its manifest). */
export interface LlamaLoadSettings {
  sequences?: number;
  contextSize?: number;
  fixtureTokenDelayMs?: number;
  speculative?: SpeculativeSettings;
}

/** What a generate() call may carry besides its input. */
export interface GenerateOptions {
  signal?: AbortSignal;
  onChunk?: (chunk: string, outputTokens: number) => void;
  /**
   * The start of the response, from an attempt that failed: generation goes on from its end
   * (as the model's own text, not as prompt), and it counts towards max_tokens and min_tokens.
   */
  continues?: string;
  /** Its length in tokens as first generated; without it, the text is tokenized (which need not give the same count). */
  continuedTokens?: number;
  /** x-session-affinity: the session's sequence state is kept between its requests. */
  session?: string;
  /** Whose request this is (an account): evaluated tokens are reused only for the same owner. */
  owner?: string;
  /** A split's decode step (domain/prefill-split.ts): the prompt was prefilled on a prefill node, whose snapshot this restores. */
  prefilledElsewhere?: boolean;
}

/**
 * Checkpoints may take this share of a generation's time at most: after one whose save took s
 * seconds in all, the next is taken at the first chunk boundary once the share allows it.
 */
const CHECKPOINT_TIME_SHARE = 0.1;

/** A generation as generate() prepares it before it takes a sequence. */
interface GenerationJob {
  request: TextGenerationInput;
  grammar?: LlamaGrammar;
  prompt: GenerationPrompt;
  limits: TokenLimits;
  continues: string;
  continuedTokens: number;
  seed: number;
}

/** A generation decoded exactly: its key, and a chat's endings (none for a completion). */
interface ExactGeneration {
  generation: string;
  endings?: ChatEndings;
}

/** A generation on its lent sequence: what the decoding steps share. */
interface SequenceJob {
  versionId: string;
  entry: LoadedModel;
  nlc: NodeLlamaCpp;
  sequence: LlamaContextSequence;
  job: GenerationJob;
  opts: GenerateOptions;
  exact: ExactGeneration | undefined;
}

/** An exact decoding's parts that the generation around it owns. */
interface ExactRun extends ExactGeneration {
  /** The prompt's tokens. */
  probe: Token[];
  stream: GenerationStream;
  signal: AbortSignal;
  tokenBias: () => import('node-llama-cpp').TokenBias;
  onCounted: (tokens: Token[]) => void;
  onResumed: (resumed: ExactResume) => void;
  checkpoints: { saved: number; seconds: number };
}

/**
 * The generation's key where it is decoded exactly (./exact-decoding.ts), with a chat's endings;
 * undefined where it is not.
 */
function exactGeneration(
  versionId: string,
  entry: LoadedModel,
  nlc: NodeLlamaCpp,
  job: GenerationJob,
  opts: GenerateOptions,
): ExactGeneration | undefined {
  const { prompt } = job;
  const endings =
    prompt.kind === 'chat'
      ? chatEndings(prompt.state, prompt.wrapper.settings, entry.model.tokenizer, nlc, (t) => entry.model.isEogToken(t))
      : undefined;
  const exact = decodesExactly({
    plainPrompt: prompt.kind === 'completion' || endings !== undefined,
    grammar: job.grammar !== undefined,
    speculative: entry.speculative !== undefined,
    request: job.request,
    continues: job.continues,
    continuedTokensKnown: opts.continuedTokens !== undefined,
  });
  return exact ? { generation: generationKey(versionId, opts.owner, job.request, job.seed), endings } : undefined;
}

/** Counts what loads: a weight load per base model, a context per adapter (engines/llama/metrics.ts). */
export interface LlamaLoadObserver {
  modelLoaded(versionId: string): void;
  adapterLoaded(versionId: string, baseVersionId: string): void;
  /** A generation's prompt went in: how many of its tokens were cached, and from which tier. */
  promptCached?(tier: CacheTier, cachedTokens: number, promptTokens: number, restoredBytes: number): void;
}

export class LlamaEngine {
  private llama?: Promise<Llama>;
  private loaded = new Map<string, LoadedModel>();
  private grammars = new GrammarCache();
  /** Prompt tokens of the prefills running or waiting for their turn now (prefill/decode split). */
  private prefilling = 0;
  /** Prefills take turns: one at a time, in arrival order (./prefill-turns.ts). */
  private prefillTurns = new PrefillTurns();

  constructor(
    private opts: LlamaEngineOptions,
    private observer?: LlamaLoadObserver,
  ) {}

  backend(): Promise<Llama> {
    this.llama ??= loadNodeLlamaCpp()
      .then((nlc) =>
        loadLlamaBackend(nlc, {
          gpu: this.opts.gpu,
          threads: this.opts.threads,
          sourceBuild: this.opts.sourceBuild,
          addonDir: this.opts.addonDir,
        }),
      )
      .then(({ llama, binary, fallback, hint, awaitedBuild }) => {
        this.binary = binary;
        this.awaitedBuild = awaitedBuild;
        this.opts.onBackend?.({ binary, fallback, hint, gpu: llama.gpu });
        return llama;
      });
    return this.llama;
  }

  /** Which llama.cpp binary runs ('prebuilt' or 'source build <folder>'), once backend() resolved. */
  binary?: string;

  /** Where the source build this process waits for will be (./backend.ts awaitedBuild). */
  private awaitedBuild?: string;

  /** CPU threads per context (KILN_ENGINE_THREADS). */
  get threads(): number {
    return this.opts.threads;
  }

  /**
   * The source build this process ran without has since been built: a new process would run it
   * (this one cannot: the prebuilt's libraries are loaded, under the same names).
   */
  sourceBuildArrived(): boolean {
    return this.awaitedBuild !== undefined && existsSync(path.join(this.awaitedBuild, 'llama-addon.node'));
  }

  /** The GPU llama.cpp runs on, or null on CPU. */
  async gpu(): Promise<string | null> {
    const llama = await this.backend();
    return llama.gpu === false ? null : llama.gpu;
  }

  /** The GPU's names and VRAM (bytes) where llama.cpp runs on one; null on CPU (KILN_ENGINE_GPU=false, or no GPU). */
  async gpuState(): Promise<GpuState | null> {
    const llama = await this.backend();
    if (llama.gpu === false) return null;
    const [names, vram] = await Promise.all([llama.getGpuDeviceNames(), llama.getVramState()]);
    return { names, vram: { total: vram.total, used: vram.used, free: vram.free } };
  }

  isLoaded(versionId: string): boolean {
    return this.loaded.has(versionId);
  }

  /** `draftFile`: the draft model's GGUF, where the settings name one (speculative decoding). */
  async load(versionId: string, file: string, settings: LlamaLoadSettings = {}, draftFile?: string): Promise<void> {
    if (this.loaded.has(versionId)) return;
    const { trainContextSize } = await validateGguf(file);
    const llama = await this.backend();
    let model: LlamaModel;
    try {
      model = await llama.loadModel({ modelPath: file });
    } catch (err) {
      throw new EngineError('ModelLoadFailed', `llama.cpp could not load the model: ${(err as Error).message}`, { cause: err });
    }
    let entry: LoadedModel;
    try {
      entry = await this.servingContext(model, settings, trainContextSize, { draftFile });
    } catch (err) {
      await model.dispose();
      throw err;
    }
    this.loaded.set(versionId, entry);
    this.observer?.modelLoaded(versionId);
  }

  /**
   * A LoRA adapter on a base version loaded here: a context of its own on the base's model, so
   * the base's weights are in memory once however many adapters run on them.
   */
  async loadAdapter(
    versionId: string,
    baseVersionId: string,
    file: string,
    settings: LlamaLoadSettings & { loraScale?: number } = {},
  ): Promise<void> {
    if (this.loaded.has(versionId)) return;
    const base = this.loaded.get(baseVersionId);
    if (!base || base.base)
      throw new EngineError('ModelLoadFailed', `the adapter's base version ${baseVersionId} is not loaded on this node`);
    await checkGgufHeader(file);
    const trainContextSize = base.model.trainContextSize;
    let entry: LoadedModel;
    try {
      entry = await this.servingContext(base.model, settings, trainContextSize, {
        lora: { adapters: [{ filePath: file, scale: settings.loraScale ?? 1 }] },
      });
    } catch (err) {
      throw new EngineError('ModelLoadFailed', `llama.cpp could not apply the LoRA adapter: ${(err as Error).message}`, { cause: err });
    }
    this.loaded.set(versionId, { ...entry, base: baseVersionId });
    this.observer?.adapterLoaded(versionId, baseVersionId);
  }

  private async servingContext(
    model: LlamaModel,
    settings: LlamaLoadSettings,
    trainContextSize: number | undefined,
    { lora, draftFile }: { lora?: { adapters: Array<{ filePath: string; scale: number }> }; draftFile?: string } = {},
  ): Promise<LoadedModel> {
    const sequences = settings.sequences ?? this.opts.sequences;
    const contextSize = Math.min(settings.contextSize ?? this.opts.contextSize, trainContextSize ?? Infinity);
    const delay = this.opts.fixtures ? (settings.fixtureTokenDelayMs ?? 0) : 0;
    const context = await model.createContext({
      // node-llama-cpp dispatches at once, skipping the schedule, when every sequence has a decode
      // queued: a spare sequence that never decodes keeps the paced schedule in force.
      sequences: delay > 0 ? sequences + 1 : sequences,
      contextSize,
      threads: this.opts.threads,
      lora,
      batching: {
        // Every decode (a token for each active sequence) is dispatched `delay` ms late: the real
        // llama.cpp path, at a pace that is the same on a laptop, on CI and on a GPU.
        dispatchSchedule: delay > 0 ? (dispatch: () => void) => void setTimeout(dispatch, delay) : DecodeGatherer.dispatchSchedule,
      },
    });
    let speculative: SpeculativeDecoding | undefined;
    try {
      speculative = settings.speculative
        ? await SpeculativeDecoding.create(await loadNodeLlamaCpp(), await this.backend(), model, settings.speculative, {
            draftFile,
            contextSize,
            sequences,
            threads: this.opts.threads,
          })
        : undefined;
    } catch (err) {
      await context.dispose();
      throw err;
    }
    releaseThreadsAtOnce(context);
    const gatherer = new DecodeGatherer(GATHER_WAIT_MS);
    gatherer.install(context);
    const pool = new SequencePool(context, sequences, speculative && (() => speculative.sequenceOptions()));
    return { model, context, pool, gatherer, speculative, saving: new Set<Promise<void>>() };
  }

  async unload(versionId: string): Promise<void> {
    const entry = this.loaded.get(versionId);
    if (!entry) return;
    // Disposing a model disposes every context on it: its adapters go first, and cleanly.
    for (const [id, other] of this.loaded) if (other.base === versionId) await this.unload(id);
    this.loaded.delete(versionId);
    // A snapshot being saved reads the context natively: it must end before the context goes.
    await Promise.all(entry.saving);
    entry.gatherer.dispose();
    await (await entry.embedding)?.dispose();
    await entry.context.dispose();
    await entry.speculative?.dispose();
    // An adapter's weights stay with the base model (node-llama-cpp frees them with it); they are small.
    if (!entry.base) await entry.model.dispose();
  }

  /** A prompt's length in tokens for a loaded version's tokenizer, as generate() counts its inputTokens. */
  tokenCount(versionId: string, text: string): number {
    return this.entryOf(versionId).model.tokenizer(text).length;
  }

  /**
   * The tokens a request's prompt is evaluated as (a chat rendered with the model's template), as
   * generate() prepares them and counts them as its inputTokens.
   */
  async promptTokens(versionId: string, request: Pick<TextGenerationInput, 'prompt' | 'messages'>): Promise<Token[]> {
    const entry = this.entryOf(versionId);
    const nlc = await loadNodeLlamaCpp();
    return generationPrompt(entry.model, request, (model) => chatWrapperOf(nlc, model)).tokens;
  }

  /** A request's text from a loaded version, streamed to `opts.onChunk` as it comes. */
  async generate(versionId: string, request: TextGenerationInput, opts: GenerateOptions = {}): Promise<GenerationResult> {
    const entry = this.entryOf(versionId);
    const nlc = await loadNodeLlamaCpp();
    const grammar = request.json_schema ? await this.grammarFor(request.json_schema, nlc.LlamaText) : undefined;
    const prompt = generationPrompt(entry.model, request, (model) => chatWrapperOf(nlc, model));
    const inputTokens = prompt.tokens.length;
    // A prompt the context cannot hold fails at once and for good, before it takes a sequence;
    // one that fits leaves the rest of the context as the most that can be generated.
    const limits = contextLimits(request, inputTokens, entry.context.contextSize);
    const continues = opts.continues ?? '';
    const continuedTokens = continues ? (opts.continuedTokens ?? entry.model.tokenizer(continues).length) : 0;
    const seed = request.seed ?? Math.floor(Math.random() * 2 ** 32);
    const run =
      tokensLeft(limits, continuedTokens) <= 0
        ? nothingToGenerate(continuedTokens)
        : await this.generateOnSequence(
            versionId,
            entry,
            nlc,
            { request, grammar, prompt, limits, continues, continuedTokens, seed },
            opts,
          );
    return generationResult({ inputTokens, continuedTokens, seed }, run);
  }

  /** The generation proper, on a sequence lent for it: what it streamed, and how it ended. */
  private async generateOnSequence(
    versionId: string,
    entry: LoadedModel,
    nlc: NodeLlamaCpp,
    job: GenerationJob,
    opts: GenerateOptions,
  ): Promise<GenerationRun> {
    const { request, limits, continuedTokens } = job;
    const probe = reuseProbe(entry.model, job.prompt);
    const exact = exactGeneration(versionId, entry, nlc, job, opts);
    const { sequenceId, sequence, heldTokens, restored } = await this.lendSequence(versionId, entry, probe, opts, {
      resuming: exact !== undefined && continuedTokens > 0,
    });
    let cachedTokens: number | undefined;
    const predictionsBefore = entry.speculative && draftCounts(sequence);
    const started = performance.now();
    const stopAt = new AbortController();
    const signal = opts.signal ? AbortSignal.any([opts.signal, stopAt.signal]) : stopAt.signal;
    const stream = this.generationStream(entry, job, opts, sequenceId, stopAt, exact?.endings?.stops ?? []);
    const biasFor = tokenBiasPolicy(entry.model, nlc.TokenBias, request.json_schema, limits);
    const tokenBias = () => biasFor(stream.outputTokens);
    const options = samplingOptions(request, {
      maxTokens: tokensLeft(limits, continuedTokens),
      seed: job.seed,
      grammar: job.grammar,
      signal,
      tokenBias,
      onToken: (tokens) => {
        // The prompt is all evaluated by the first token: what it kept of the sequence's old tokens was reused.
        cachedTokens ??= cachedPromptTokens(heldTokens, sequence.contextTokens);
        stream.countTokens(tokens);
      },
      onTextChunk: (text) => stream.takeText(text),
    });
    const { ending, resumed, checkpoints } = await this.decodeToEnding(
      { versionId, entry, nlc, sequence, job, opts, exact },
      {
        probe,
        stream,
        signal,
        tokenBias,
        options,
        sequenceId,
        started,
        predictionsBefore,
      },
    );
    // A split's decode step that restored a snapshot of the prompt (the prefill node's) keeps none of its own: that
    // snapshot holds the prompt, and a next turn as long is prefilled on a prefill node again, which
    // finds it on its own disk. Saving it again would copy the state out under the context's lock
    // (every stream's decode waits), then hash and upload it, on the core the streams decode on.
    const keep = !ending.aborted && !(opts.prefilledElsewhere && restored);
    await this.snapshotThenRelease(versionId, entry, sequence, opts.owner, keep);
    const output = generationOutput({
      chunks: stream.chunks,
      outputTokens: stream.outputTokens,
      cachedTokens,
      restored,
      resumed,
      checkpoints,
    });
    this.observer?.promptCached?.(
      cacheTierOf(output.cachedTokens, restored),
      output.cachedTokens,
      job.prompt.tokens.length,
      restored?.bytes ?? 0,
    );
    return { output, ending };
  }

  /**
   * Decodes the lent sequence to its end and says how it ended; an abort before the first decode
   * ends it early. The sequence leaves the decode gatherer whatever happens.
   */
  private async decodeToEnding(
    on: SequenceJob,
    d: Pick<ExactRun, 'probe' | 'stream' | 'signal' | 'tokenBias'> &
      Pick<Decoding, 'options'> & {
        sequenceId: number;
        started: number;
        predictionsBefore: ReturnType<typeof draftCounts> | false | undefined;
      },
  ): Promise<{ ending: GenerationEnding; resumed?: ExactResume; checkpoints: { saved: number; seconds: number } }> {
    const { entry, sequence, opts, exact } = on;
    const { probe, stream, signal, started } = d;
    const disposers: Array<() => void> = [];
    let resumed: ExactResume | undefined;
    const checkpoints = { saved: 0, seconds: 0 };
    try {
      // Exact decoding does it itself (after a checkpoint, or not at all); a draft model's sequence is kept in step by its own evaluations.
      if (!exact && !entry.speculative) await evaluatePromptButLast(sequence, probe, signal);
      const stopReason = await this.decodeOn(on, {
        probe,
        stream,
        signal,
        tokenBias: d.tokenBias,
        options: d.options,
        checkpoints,
        onResumed: (r) => (resumed = r),
        onDispose: (dispose) => disposers.push(dispose),
      });
      stream.flush();
      const draft = d.predictionsBefore ? draftCounts(sequence, d.predictionsBefore) : undefined;
      const canceled = opts.signal?.aborted === true;
      const { stopped: atStopString, firstChunkAt } = stream;
      const ending = endedByDecoding({ stopReason, atStopString, canceled, started, firstChunkAt, ended: performance.now(), draft });
      return { ending, resumed, checkpoints };
    } catch (err) {
      if (!signal.aborted) throw err;
      return {
        ending: endedByEarlyAbort({ canceled: opts.signal?.aborted === true, started, ended: performance.now() }),
        resumed,
        checkpoints,
      };
    } finally {
      for (const dispose of disposers) dispose();
      entry.gatherer.leave(d.sequenceId);
    }
  }

  /** Decodes on the lent sequence: exactly (./exact-decoding.ts) where `exact` names the generation, else by node-llama-cpp's calls. */
  private decodeOn(
    on: SequenceJob,
    d: Omit<ExactRun, keyof ExactGeneration | 'onCounted'> & Pick<Decoding, 'options' | 'onDispose'>,
  ): Promise<string> {
    const { versionId, entry, nlc, sequence, job, opts, exact } = on;
    if (exact) {
      const { options, onDispose: _onDispose, ...run } = d;
      return this.decodeExactlyOn(versionId, entry, sequence, job, opts, {
        ...run,
        ...exact,
        onCounted: (tokens) => options.onToken?.(tokens),
      });
    }
    return decode({
      nlc,
      sequence,
      contextSize: entry.context.contextSize,
      prompt: job.prompt,
      continues: job.continues,
      continuedTokens: job.continuedTokens,
      limits: job.limits,
      options: d.options,
      stream: d.stream,
      signal: d.signal,
      onDispose: d.onDispose,
    });
  }

  /**
   * A sequence from the pool for a generation, with a snapshot of the prompt restored into it where
   * one holds more of it (not for an exact continuation, which restores its own checkpoint), and
   * what it holds before the prompt goes in: restored tokens count as reused ones.
   */
  private async lendSequence(
    versionId: string,
    entry: LoadedModel,
    probe: Token[],
    opts: GenerateOptions,
    { resuming }: { resuming: boolean },
  ) {
    const lent = await entry.pool.acquire(opts.signal, probe, { session: opts.session, owner: opts.owner });
    const { id: sequenceId, sequence } = lent;
    const restored = await (resuming
      ? Promise.resolve(undefined)
      : this.restoreSnapshot(versionId, entry, probe, sequence, opts.owner)
    ).catch((err: unknown) => {
      entry.pool.release(sequence);
      throw err;
    });
    const heldTokens = restored ? [...sequence.contextTokens] : lent.heldTokens;
    return { sequenceId, sequence, heldTokens, restored };
  }

  /**
   * What a generation streams: its text after the continued part, cut at a stop string or
   * max_tokens. An exactly decoded chat's text stop triggers are stop strings that never show in part.
   */
  private generationStream(
    entry: LoadedModel,
    job: GenerationJob,
    opts: GenerateOptions,
    sequenceId: number,
    stopAt: AbortController,
    chatStops: readonly string[],
  ) {
    return new GenerationStream(
      {
        continues: job.continues,
        continuedTokens: job.continuedTokens,
        maxTokens: job.limits.max_tokens,
        stops: stopStringsOf(job.request.stop),
        heldStops: chatStops,
        detokenize: (tokens) => entry.model.detokenize(tokens),
      },
      { onChunk: opts.onChunk, onLastToken: () => entry.gatherer.leave(sequenceId), onStop: () => stopAt.abort() },
    );
  }

  /**
   * A repeatable completion or plain chat, decoded by ./exact-decoding.ts. One that continues a failed attempt
   * restores that generation's latest checkpoint holding no more than was streamed (or prefills
   * the prompt again where none is usable) and draws again the streamed tokens after it, streaming
   * only the ones after them. At chunk boundaries a checkpoint is saved, as often as its cost allows.
   */
  private async decodeExactlyOn(
    versionId: string,
    entry: LoadedModel,
    sequence: LlamaContextSequence,
    job: GenerationJob,
    opts: GenerateOptions,
    run: ExactRun,
  ): Promise<string> {
    const { model } = entry;
    const { continuedTokens, continues } = job;
    const { start, resumed } =
      continuedTokens > 0 ? await this.resumeExactly(versionId, sequence, job, opts, run) : { start: [], resumed: undefined };
    // Text goes out by whole characters: a token that ends inside one waits for the next (at most 4 bytes).
    let textFrom = continuedTokens;
    // A chat's answer loses its leading whitespace as LlamaChat drops it; a continued one had it dropped already.
    const startTrim = new StartTrim(continuedTokens === 0 ? (run.endings?.ignoredAtStart ?? []) : []);
    const { stopReason, generated } = await decodeExactly({
      model,
      sequence,
      promptTokens: run.probe,
      start: { generated: start },
      maxTokens: job.limits.max_tokens,
      sampling: { temperature: job.request.temperature, topK: job.request.top_k, topP: job.request.top_p, seed: job.seed },
      tokenBias: run.tokenBias,
      signal: run.signal,
      onToken: (token, index, all) => {
        if (index < continuedTokens) return;
        run.onCounted([token]);
        const text = model.detokenize(all.slice(textFrom, index + 1), false, all.slice(Math.max(0, textFrom - 8), textFrom));
        if (text.endsWith('\uFFFD') && index + 1 - textFrom < 4) return;
        textFrom = index + 1;
        run.stream.takeText(startTrim.take(text));
      },
      atBoundary: this.checkpointSaver(versionId, sequence, opts, run),
    });
    if (resumed && generated.length >= continuedTokens) {
      resumed.matched = cleanText(model.detokenize(generated.slice(0, continuedTokens))) === cleanText(continues);
    }
    return stopReason;
  }

  /**
   * Where an exact continuation starts: the generation's latest checkpoint holding no more than was
   * streamed, restored into the sequence where it begins with this prompt; else nothing (the prompt
   * is prefilled again, on a sequence cleared of a checkpoint that did not fit).
   */
  private async resumeExactly(
    versionId: string,
    sequence: LlamaContextSequence,
    job: GenerationJob,
    opts: GenerateOptions,
    run: ExactRun,
  ): Promise<{ start: Token[]; resumed: ExactResume }> {
    const begun = performance.now();
    const promptTokens = run.probe;
    const checkpoint = await this.opts.snapshots
      ?.restoreCheckpoint(versionId, opts.owner, run.generation, promptTokens.length + job.continuedTokens, sequence)
      .catch(() => undefined);
    const usable = checkpoint && checkpointStart(checkpoint, promptTokens);
    if (checkpoint && !usable) await sequence.clearHistory();
    const start = usable ?? [];
    const resumed: ExactResume = {
      from: usable ? 'checkpoint' : 'prefill',
      ...(usable ? { tier: checkpoint.tier } : {}),
      atToken: start.length,
      seconds: (performance.now() - begun) / 1000,
      redrawn: job.continuedTokens - start.length,
      matched: true,
    };
    run.onResumed(resumed);
    return { start, resumed };
  }

  /**
   * Saves a checkpoint at a chunk boundary when one is due: again once the save (the copy, then
   * its hash and record, which take CPU from the decoding too) is a small share of the time
   * since, and never while one is under way. The upload is not counted: with it, checkpoints are
   * spaced so far apart that a killed engine's retry draws a hundred tokens again, not a few.
   */
  private checkpointSaver(versionId: string, sequence: LlamaContextSequence, opts: GenerateOptions, run: ExactRun) {
    const snapshots = this.opts.snapshots;
    let lastSave = performance.now();
    let dueAfterMs = 0;
    return async (all: readonly Token[]): Promise<void> => {
      if (!snapshots || performance.now() - lastSave < dueAfterMs) return;
      const begun = performance.now();
      dueAfterMs = Infinity;
      const saved = await snapshots
        .saveCheckpoint(versionId, opts.owner, sequence, { generation: run.generation, pending: [all.at(-1)!] })
        .catch(() => undefined);
      run.checkpoints.saved += 1;
      run.checkpoints.seconds += (performance.now() - begun) / 1000;
      void (saved?.recorded ?? Promise.resolve()).then(() => {
        lastSave = performance.now();
        dueAfterMs = checkpointDueAfterMs(lastSave - begun, CHECKPOINT_TIME_SHARE);
      });
    };
  }

  /**
   * Prefill/decode split, prefill side: evaluates the request's prompt on a sequence (from a
   * snapshot where one holds part of it) and puts its KV snapshot in the object tier, where the
   * decode node finds it by the same prompt. `snapshot` is undefined when none could be kept (the
   * prompt is shorter than the store's minimum, or there is no object tier): the decode node then
   * prefills it itself. Prefills take turns (./prefill-turns.ts): `waitSeconds` is the wait for this one's.
   */
  async prefill(
    versionId: string,
    request: Pick<TextGenerationInput, 'prompt' | 'messages'>,
    opts: { owner?: string; signal?: AbortSignal } = {},
  ): Promise<{ snapshot?: KvSnapshotEntry; tokens: number; waitSeconds: number; prefillSeconds: number; uploadSeconds: number }> {
    const entry = this.entryOf(versionId);
    const nlc = await loadNodeLlamaCpp();
    const probe = reuseProbe(
      entry.model,
      generationPrompt(entry.model, request, (model) => chatWrapperOf(nlc, model)),
    );
    if (probe.length > entry.context.contextSize) {
      throw new EngineError(
        'ContextLengthExceeded',
        `the prompt is ${probe.length} tokens, more than the context of ${entry.context.contextSize}`,
      );
    }
    const arrived = performance.now();
    this.prefilling += probe.length;
    const giveBack = await this.prefillTurns.take(opts.signal).catch((err: unknown) => {
      this.prefilling -= probe.length;
      throw err;
    });
    const { sequence } = await entry.pool.acquire(opts.signal, probe, { owner: opts.owner }).catch((err: unknown) => {
      giveBack();
      this.prefilling -= probe.length;
      throw err;
    });
    try {
      const started = performance.now();
      await this.restoreSnapshot(versionId, entry, probe, sequence, opts.owner);
      const held = sharedPrefix(sequence.contextTokens, probe);
      if (held < sequence.nextTokenIndex) await sequence.eraseContextTokenRanges([{ start: held, end: sequence.nextTokenIndex }]);
      if (held < probe.length) await sequence.evaluateWithoutGeneratingNewTokens(probe.slice(held));
      const saving = performance.now();
      const snapshot = entry.speculative ? undefined : await this.opts.snapshots?.publish(versionId, opts.owner, sequence);
      return {
        snapshot,
        tokens: probe.length,
        waitSeconds: (started - arrived) / 1000,
        prefillSeconds: (saving - started) / 1000,
        uploadSeconds: (performance.now() - saving) / 1000,
      };
    } finally {
      giveBack();
      this.prefilling -= probe.length;
      entry.pool.release(sequence);
    }
  }

  /** What this engine is doing now, for token-aware placement: prompt tokens being prefilled, sequences lent, their KV bytes. */
  currentLoad(): NodeLoad {
    let activeSequences = 0;
    let kvBytes = 0;
    for (const entry of this.loaded.values()) {
      const lent = entry.pool.lentSequences();
      activeSequences += lent.length;
      kvBytes += lent.reduce((sum, s) => sum + s.nextTokenIndex, 0) * kvBytesPerToken(entry.model);
    }
    return { promptTokensInFlight: this.prefilling, activeSequences, kvBytes };
  }

  /** Where a snapshot (on disk, else in object storage) holds more of the prompt than the lent sequence does, it is loaded in. */
  private async restoreSnapshot(
    versionId: string,
    entry: LoadedModel,
    probe: Token[],
    sequence: LlamaContextSequence,
    owner: string | undefined,
  ) {
    // A draft model's sequence would not follow a restored state; a LoRA context is keyed by its own version.
    if (!this.opts.snapshots || entry.speculative) return undefined;
    return this.opts.snapshots.restore(versionId, owner, probe, sequence);
  }

  /**
   * The sequence goes back to the pool once its state is saved (if it is worth a snapshot), before
   * the result returns: a request that follows at once then finds it live, where its next turn
   * reuses the very cells it filled (a restore places them anew, and on near ties llama.cpp's sums
   * in other cells can pick another greedy token). A failed save keeps nothing and costs nothing else.
   */
  private async snapshotThenRelease(
    versionId: string,
    entry: LoadedModel,
    sequence: LlamaContextSequence,
    owner: string | undefined,
    whole: boolean,
  ): Promise<void> {
    const snapshots = this.opts.snapshots;
    const saving =
      snapshots && !entry.speculative && whole ? snapshots.save(versionId, owner, sequence).catch(() => undefined) : Promise.resolve();
    entry.saving.add(saving);
    try {
      await saving;
    } finally {
      entry.saving.delete(saving);
      entry.pool.release(sequence);
    }
  }

  private entryOf(versionId: string): LoadedModel {
    const entry = this.loaded.get(versionId);
    if (!entry) throw new Error(`model version ${versionId} is not loaded on this node`);
    return entry;
  }

  private grammarFor(schema: JsonSchema, Text: typeof LlamaText): Promise<LlamaGrammar> {
    return this.grammars.get(grammarKey(schema), async () => jsonSchemaGrammar(await this.backend(), schema, Text));
  }

  /**
   * One unit vector per text, from a lazily created embedding context of the loaded model, as long
   * as the version's context (at most EMBEDDING_CONTEXT_MAX). llama.cpp pools the tokens' states as
   * the GGUF says (`<arch>.pooling_type`: mean for sentence-transformers models) and returns them
   * unnormalised; Kiln scales each to length 1, as OpenAI's embeddings and sentence-transformers'
   * are, so a dot product is the cosine similarity. A text longer than the context is the caller's
   * to shorten: cutting it would embed something else than what was sent.
   */
  async embed(versionId: string, texts: string[], signal?: AbortSignal): Promise<{ vectors: number[][]; tokens: number }> {
    const entry = this.entryOf(versionId);
    const contextSize = Math.min(entry.context.contextSize, EMBEDDING_CONTEXT_MAX);
    entry.embedding ??= entry.model.createEmbeddingContext({ contextSize, threads: this.opts.threads });
    const context = await entry.embedding;
    const vectors: number[][] = [];
    let tokens = 0;
    for (const [i, text] of texts.entries()) {
      signal?.throwIfAborted();
      // With the beginning and end tokens the context adds; node-llama-cpp refuses as many as the context holds.
      const length = context.calculateInputLength(text);
      if (length >= contextSize) {
        const which = texts.length > 1 ? `text ${i} is` : 'the text is';
        throw new EngineError(
          'ContextLengthExceeded',
          `input.text: ${which} ${length} tokens, more than the model's context of ${contextSize} tokens holds`,
        );
      }
      tokens += entry.model.tokenizer(text).length;
      vectors.push(l2Normalize((await context.getEmbeddingFor(text)).vector));
    }
    return { vectors, tokens };
  }

  async dispose(): Promise<void> {
    await this.opts.snapshots?.settled();
    for (const id of [...this.loaded.keys()]) await this.unload(id);
    const llama = await this.llama;
    await llama?.dispose();
  }
}
