/**
 * llama.cpp through node-llama-cpp. One context per loaded version with N sequences, so N
 * predictions on the same model run at once (continuous batching). CUDA is used when the host
 * has it; llama.cpp is never built or downloaded at run time (which binary: ./llama-backend.ts).
 */
import { open } from 'node:fs/promises';
import type {
  ChatHistoryItem,
  Llama,
  LlamaContext,
  LlamaEmbeddingContext,
  LlamaGrammar,
  LlamaModel,
  Token,
  TokenBias,
} from 'node-llama-cpp';
import type { ChatMessage, TextGenerationInput } from '../../domain/tasks/text-generation';
import { EngineError } from '../engine-error';
import { closingReserve, grammarKey, GrammarCache, jsonSchemaGrammar, wrapUpBias } from './grammar';
import { cleanText } from './text';
import { contextLimits } from './token-budget';
import { DecodeGatherer } from './decode-gatherer';
import { releaseThreadsAtOnce } from './thread-release';
import { draftCounts, SpeculativeDecoding, type DraftCounts } from './speculative';
import { type SpeculativeSettings } from '../../domain/speculative-settings';
import { SequencePool } from './sequence-pool';
import { loadLlamaBackend, type SourceBuildSetting } from './backend';
import { cachedPromptTokens, promptProbe } from './prefix-reuse';
import type { GpuState } from '../../lib/hardware';

type NodeLlamaCpp = typeof import('node-llama-cpp');

// node-llama-cpp is ESM with top-level await: it can only be reached through a real import().
let nodeLlamaCpp: Promise<NodeLlamaCpp> | undefined;
export function loadNodeLlamaCpp(): Promise<NodeLlamaCpp> {
  nodeLlamaCpp ??= import('node-llama-cpp');
  return nodeLlamaCpp;
}

/** Metadata llama.cpp asserts on: a file without it would abort the process instead of failing. */
const REQUIRED_LLAMA_KEYS = [
  'context_length',
  'embedding_length',
  'block_count',
  'feed_forward_length',
  'attention.head_count',
] as const;

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
  /** A LoRA adapter version: its context is on this base version's model, which it does not own. */
  base?: string;
  context: LlamaContext;
  pool: SequencePool;
  gatherer: DecodeGatherer;
  embedding?: Promise<LlamaEmbeddingContext>;
  speculative?: SpeculativeDecoding;
}

/** OpenAI-style messages to node-llama-cpp's chat history, ending with the model's turn. */
/** `continues`: the start of the model's response, which generation goes on from (LlamaChat continues a last model item). */
function toChatHistory(messages: ChatMessage[], continues = ''): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = messages.map((m) =>
    m.role === 'system'
      ? { type: 'system', text: m.content }
      : m.role === 'user'
        ? { type: 'user', text: m.content }
        : { type: 'model', response: [m.content] },
  );
  history.push({ type: 'model', response: continues ? [continues] : [] });
  return history;
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
  aborted: boolean;
  stopReason: string;
  seed: number;
  /** Seconds from the start of generation to the first chunk. */
  timeToFirstToken: number | null;
  predictSeconds: number;
  /** Draft tokens accepted and rejected, where the version decodes speculatively. */
  draft?: DraftCounts;
}

/**
 * How long a gathered decode waits for a sequence of the last batch that has not asked again: the
 * JS between a token's sampling and the next decode request takes well under this; a sequence
 * that is done calls leave(), so this only bounds the odd case (a stop string, an abort).
 */
const GATHER_WAIT_MS = 5;

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

/** Counts what loads: a weight load per base model, a context per adapter (engines/llama/metrics.ts). */
export interface LlamaLoadObserver {
  modelLoaded(versionId: string): void;
  adapterLoaded(versionId: string, baseVersionId: string): void;
}

export class LlamaEngine {
  private llama?: Promise<Llama>;
  private loaded = new Map<string, LoadedModel>();
  private grammars = new GrammarCache();

  constructor(
    private opts: LlamaEngineOptions,
    private observer?: LlamaLoadObserver,
  ) {}

  backend(): Promise<Llama> {
    this.llama ??= loadNodeLlamaCpp()
      .then((nlc) => loadLlamaBackend(nlc, { gpu: this.opts.gpu, threads: this.opts.threads, sourceBuild: this.opts.sourceBuild }))
      .then(({ llama, binary, fallback, hint }) => {
        this.binary = binary;
        this.opts.onBackend?.({ binary, fallback, hint, gpu: llama.gpu });
        return llama;
      });
    return this.llama;
  }

  /** Which llama.cpp binary runs ('prebuilt' or 'source build <folder>'), once backend() resolved. */
  binary?: string;

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
  async loadAdapter(versionId: string, baseVersionId: string, file: string, settings: LlamaLoadSettings & { loraScale?: number } = {}): Promise<void> {
    if (this.loaded.has(versionId)) return;
    const base = this.loaded.get(baseVersionId);
    if (!base || base.base) throw new EngineError('ModelLoadFailed', `the adapter's base version ${baseVersionId} is not loaded on this node`);
    await checkGgufHeader(file);
    const trainContextSize = base.model.trainContextSize;
    let entry: LoadedModel;
    try {
      entry = await this.servingContext(base.model, settings, trainContextSize, { lora: { adapters: [{ filePath: file, scale: settings.loraScale ?? 1 }] } });
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
        ? await SpeculativeDecoding.create(await loadNodeLlamaCpp(), await this.backend(), model, settings.speculative, { draftFile, contextSize, sequences, threads: this.opts.threads })
        : undefined;
    } catch (err) {
      await context.dispose();
      throw err;
    }
    releaseThreadsAtOnce(context);
    const gatherer = new DecodeGatherer(GATHER_WAIT_MS);
    gatherer.install(context);
    const pool = new SequencePool(context, sequences, speculative && (() => speculative.sequenceOptions()));
    return { model, context, pool, gatherer, speculative };
  }

  async unload(versionId: string): Promise<void> {
    const entry = this.loaded.get(versionId);
    if (!entry) return;
    // Disposing a model disposes every context on it: its adapters go first, and cleanly.
    for (const [id, other] of this.loaded) if (other.base === versionId) await this.unload(id);
    this.loaded.delete(versionId);
    entry.gatherer.dispose();
    await (await entry.embedding)?.dispose();
    await entry.context.dispose();
    await entry.speculative?.dispose();
    // An adapter's weights stay with the base model (node-llama-cpp frees them with it); they are small.
    if (!entry.base) await entry.model.dispose();
  }

  /** A prompt's length in tokens for a loaded version's tokenizer, as generate() counts its inputTokens. */
  tokenCount(versionId: string, text: string): number {
    const entry = this.loaded.get(versionId);
    if (!entry) throw new Error(`model version ${versionId} is not loaded on this node`);
    return entry.model.tokenizer(text).length;
  }

  async generate(
    versionId: string,
    request: TextGenerationInput,
    opts: {
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
    } = {},
  ): Promise<GenerationResult> {
    const entry = this.loaded.get(versionId);
    if (!entry) throw new Error(`model version ${versionId} is not loaded on this node`);
    const { LlamaCompletion, LlamaChat, TokenBias, LlamaText, resolveChatWrapper } = await loadNodeLlamaCpp();
    const schema = request.json_schema;
    const grammar: LlamaGrammar | undefined = schema
      ? await this.grammars.get(grammarKey(schema), async () => jsonSchemaGrammar(await this.backend(), schema, LlamaText))
      : undefined;
    const tokenizer = entry.model.tokenizer;
    const chatWrapper = request.messages ? resolveChatWrapper(entry.model) : undefined;
    const history = request.messages ? toChatHistory(request.messages) : undefined;
    const promptTokens =
      chatWrapper && history ? chatWrapper.generateContextState({ chatHistory: history }).contextText.tokenize(tokenizer) : tokenizer(request.prompt ?? '');
    const inputTokens = promptTokens.length;
    // A prompt the context cannot hold fails at once and for good, before it takes a sequence;
    // one that fits leaves the rest of the context as the most that can be generated.
    const input = { ...request, ...contextLimits(request, inputTokens, entry.context.contextSize) };
    const continues = opts.continues ?? '';
    const continuedTokens = continues ? (opts.continuedTokens ?? tokenizer(continues).length) : 0;
    const seed = input.seed ?? Math.floor(Math.random() * 2 ** 32);
    if (continuedTokens >= input.max_tokens) {
      return { chunks: [], inputTokens, outputTokens: continuedTokens, continuedTokens, cachedTokens: 0, aborted: false, stopReason: 'maxTokens', seed, timeToFirstToken: null, predictSeconds: 0 };
    }
    const probe = history ? promptTokens : promptProbe(entry.model, request.prompt ?? '');
    const { id: sequenceId, sequence, heldTokens } = await entry.pool.acquire(opts.signal, probe, { session: opts.session, owner: opts.owner });
    let cachedTokens = 0;
    let measured = false;
    const predictionsBefore = entry.speculative && draftCounts(sequence);
    const started = performance.now();
    const chunks: string[] = [];
    let outputTokens = continuedTokens;
    let firstChunkAt: number | null = null;
    const endTokens = [entry.model.tokens.eos, entry.model.tokens.eot].filter((t): t is Token => t != null);
    const holdEnd = new TokenBias(tokenizer);
    for (const t of endTokens) holdEnd.set(t, 'never');
    const noBias = new TokenBias(tokenizer);
    // Under a grammar, the last tokens of the budget favour closing quotes and brackets, so the
    // JSON ends complete instead of being cut off mid-string (as a model with no sense of the
    // budget, or random weights, would otherwise do).
    const closing: TokenBias | undefined = grammar ? wrapUpBias(entry.model, TokenBias) : undefined;
    const wrapUpFrom = schema ? input.max_tokens - (closingReserve(schema) + 8) : Infinity;
    const biasNow = () => (outputTokens < input.min_tokens ? holdEnd : closing && outputTokens >= wrapUpFrom ? closing : noBias);
    // Stop strings are matched on the decoded text here: llama.cpp's detector misses a string
    // that begins with a space, since a word token carries its space as a prefix.
    const stops = input.stop === undefined ? [] : [input.stop].flat();
    const stopAt = new AbortController();
    const signal = opts.signal ? AbortSignal.any([opts.signal, stopAt.signal]) : stopAt.signal;
    let text = continues;
    let stopped = false;
    let clipped: Token[] | undefined;
    const options = {
      maxTokens: input.max_tokens - continuedTokens,
      temperature: input.temperature,
      topP: input.top_p,
      topK: input.top_k,
      seed,
      // No penalty the input does not ask for: temperature 0 then means the most likely token, and
      // a penalty over the tokens so far would judge a drafted token (checked in a batch before the
      // tokens ahead of it are counted) otherwise than the same token decoded alone.
      repeatPenalty: false as const,
      // min_tokens: the end-of-text tokens are banned until enough has been generated.
      tokenBias: biasNow,
      grammar,
      signal,
      stopOnAbortSignal: true,
      onToken: (tokens: Token[]) => {
        // The prompt is all evaluated by the first token: what it kept of the sequence's old tokens was reused.
        if (!measured) {
          measured = true;
          cachedTokens = cachedPromptTokens(heldTokens, sequence.contextTokens);
        }
        // node-llama-cpp holds a token that ends mid-character and skips its maxTokens check for
        // it, so it can draw one token past max_tokens; whatever lies past is cut off here.
        const room = input.max_tokens - outputTokens;
        if (tokens.length > room) clipped = tokens.slice(0, Math.max(0, room));
        outputTokens += Math.min(tokens.length, room);
        // The last token: this sequence decodes nothing more, so the others need not wait for it.
        if (outputTokens >= input.max_tokens) entry.gatherer.leave(sequenceId);
      },
      onTextChunk: (whole: string) => {
        // A clipped token may end inside a character: what is incomplete there is dropped.
        const chunk = cleanText(clipped ? entry.model.detokenize(clipped) : whole);
        clipped = undefined;
        if (stopped || chunk === '') return;
        firstChunkAt ??= performance.now();
        const before = text.length;
        text += chunk;
        const hit = stops.map((s) => text.indexOf(s, Math.max(0, before - s.length + 1))).filter((i) => i >= 0);
        if (hit.length > 0) {
          stopped = true;
          const keep = Math.min(...hit) - before;
          if (keep > 0) {
            chunks.push(chunk.slice(0, keep));
            opts.onChunk?.(chunk.slice(0, keep), outputTokens);
          }
          stopAt.abort();
          return;
        }
        chunks.push(chunk);
        opts.onChunk?.(chunk, outputTokens);
      },
    };
    const disposers: Array<() => void> = [];
    try {
      let stopReason: string;
      if (history) {
        const chat = new LlamaChat({ contextSequence: sequence, chatWrapper });
        disposers.push(() => chat.dispose({ disposeSequence: false }));
        ({ metadata: { stopReason } } = await chat.generateResponse(continues && request.messages ? toChatHistory(request.messages, continues) : history, options));
      } else {
        const completion = new LlamaCompletion({ contextSequence: sequence });
        disposers.push(() => completion.dispose({ disposeSequence: false }));
        // LlamaCompletion keeps its context shift size (a tenth of the context) free by cutting the
        // prompt's beginning off: where a prompt contextLimits let through leaves less room, the
        // shift is that room, so the prompt is evaluated whole (max_tokens is clamped to the room).
        const contextSize = entry.context.contextSize;
        const shiftFor = (promptTokens: number) => Math.max(1, Math.min(Math.floor(contextSize / 10), contextSize - promptTokens));
        ({ metadata: { stopReason } } = await completion.generateCompletionWithMeta((input.prompt ?? '') + continues, {
          ...options,
          contextShiftSize: shiftFor(inputTokens + continuedTokens),
        }));
        // min_tokens: llama.cpp sometimes ends on end-of-sequence despite the ban: the nucleus
        // (top_p) is taken before the ban, so where it holds only end tokens nothing else can be
        // drawn. Carry on from the text so far (the prefix is still in the context); after a call
        // that added nothing, the rest up to min_tokens is drawn from the whole distribution
        // (a token at a time would cost a call per token where end tokens keep dominating).
        let stalled = outputTokens === continuedTokens;
        while (stopReason === 'eogToken' && outputTokens < input.min_tokens && !signal.aborted) {
          const before = outputTokens;
          const prompt = (input.prompt ?? '') + text;
          if (stalled) {
            await completion.generateCompletionWithMeta(prompt, { ...options, contextShiftSize: shiftFor(inputTokens + outputTokens), topP: 1, maxTokens: input.min_tokens - outputTokens });
            // Nothing can be drawn at all: end short rather than spin.
            if (outputTokens === before) break;
            stalled = false;
            // Past min_tokens the model was free to end, as it was about to.
            stopReason = outputTokens >= input.max_tokens ? 'maxTokens' : 'eogToken';
            continue;
          }
          ({ metadata: { stopReason } } = await completion.generateCompletionWithMeta(prompt, {
            ...options,
            contextShiftSize: shiftFor(inputTokens + outputTokens),
            maxTokens: input.max_tokens - outputTokens,
          }));
          stalled = outputTokens === before;
        }
      }
      const canceled = opts.signal?.aborted === true;
      return {
        chunks,
        inputTokens,
        outputTokens,
        continuedTokens,
        cachedTokens,
        aborted: canceled,
        stopReason: stopped && !canceled ? 'stop' : stopReason,
        seed,
        timeToFirstToken: firstChunkAt === null ? null : (firstChunkAt - started) / 1000,
        predictSeconds: (performance.now() - started) / 1000,
        ...(predictionsBefore ? { draft: draftCounts(sequence, predictionsBefore) } : {}),
      };
    } catch (err) {
      if (!signal.aborted) throw err;
      // Aborted before the first token: nothing was generated.
      return {
        chunks,
        inputTokens,
        outputTokens,
        continuedTokens,
        cachedTokens,
        aborted: opts.signal?.aborted === true,
        stopReason: opts.signal?.aborted ? 'abort' : 'stop',
        seed,
        timeToFirstToken: null,
        predictSeconds: (performance.now() - started) / 1000,
      };
    } finally {
      for (const dispose of disposers) dispose();
      entry.gatherer.leave(sequenceId);
      entry.pool.release(sequence);
    }
  }

  /** One vector per text, from a lazily created embedding context of the loaded model. */
  async embed(versionId: string, texts: string[], signal?: AbortSignal): Promise<{ vectors: number[][]; tokens: number }> {
    const entry = this.loaded.get(versionId);
    if (!entry) throw new Error(`model version ${versionId} is not loaded on this node`);
    entry.embedding ??= entry.model.createEmbeddingContext({ contextSize: Math.min(this.opts.contextSize, 2048), threads: this.opts.threads });
    const context = await entry.embedding;
    const vectors: number[][] = [];
    let tokens = 0;
    for (const text of texts) {
      signal?.throwIfAborted();
      tokens += entry.model.tokenizer(text).length;
      vectors.push([...(await context.getEmbeddingFor(text)).vector]);
    }
    return { vectors, tokens };
  }

  async dispose(): Promise<void> {
    for (const id of [...this.loaded.keys()]) await this.unload(id);
    const llama = await this.llama;
    await llama?.dispose();
  }
}
