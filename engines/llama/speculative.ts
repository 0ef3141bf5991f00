/**
 * Speculative decoding for a loaded llama.cpp version: each of its sequences gets a token
 * predictor (node-llama-cpp's `tokenPredictor`), either a draft model's sequence or a lookup of
 * the prompt's own tokens. The target model checks the predicted tokens in one batch and keeps
 * those it would have drawn itself, so the output is the target's; only the speed changes.
 */
import type { Llama, LlamaContext, LlamaContextSequence, LlamaModel, TokenPredictor } from 'node-llama-cpp';
import type { SpeculativeSettings } from '../../domain/speculative-settings';
import { EngineError } from '../engine-error';
import { releaseThreadsAtOnce } from './thread-release';

/** Draft tokens the target accepted and rejected, over one generation or a sequence's life. */
export interface DraftCounts {
  accepted: number;
  rejected: number;
}

type NodeLlamaCpp = typeof import('node-llama-cpp');

/**
 * Tokens a draft model predicts ahead of each check: llama.cpp's server default, and the best of
 * 4 / 8 / 16 / 24 in `bench -- speculative` (README, Benchmarks).
 */
export const DEFAULT_DRAFT_TOKENS = 16;

/** Why the draft cannot draft for the target (a different vocabulary), or undefined when it can. */
export function tokenizerMismatch(target: LlamaModel, draft: LlamaModel): string | undefined {
  const vocab = (m: LlamaModel) => (m.fileInfo.metadata as { tokenizer?: { ggml?: Record<string, unknown> } }).tokenizer?.ggml ?? {};
  const t = vocab(target);
  const d = vocab(draft);
  if (t.model !== d.model) return `the draft's tokenizer is ${String(d.model)}, the target's ${String(t.model)}`;
  const tt = (t.tokens ?? []) as string[];
  const dt = (d.tokens ?? []) as string[];
  if (tt.length !== dt.length) return `the draft has ${dt.length} tokens in its vocabulary, the target ${tt.length}`;
  const differs = tt.findIndex((token, i) => token !== dt[i]);
  if (differs >= 0) return `token ${differs} is ${JSON.stringify(dt[differs])} in the draft, ${JSON.stringify(tt[differs])} in the target`;
  for (const special of ['bos', 'eos'] as const) {
    if (target.tokens[special] !== draft.tokens[special]) return `the ${special} token differs`;
  }
  return undefined;
}

export class SpeculativeDecoding {
  private constructor(
    private readonly settings: SpeculativeSettings,
    private readonly lib: NodeLlamaCpp,
    private readonly draft?: { model: LlamaModel; context: LlamaContext },
  ) {}

  /**
   * Loads what the predictors need beside the target: for a draft model, its weights and a context
   * with a sequence for each of the target's (a draft of the wrong vocabulary fails the load, typed,
   * before anything runs).
   */
  static async create(
    lib: NodeLlamaCpp,
    llama: Llama,
    target: LlamaModel,
    settings: SpeculativeSettings,
    opts: { draftFile?: string; contextSize: number; sequences: number; threads: number },
  ): Promise<SpeculativeDecoding> {
    if (settings.type === 'input_lookup') return new SpeculativeDecoding(settings, lib);
    if (!opts.draftFile) throw new EngineError('ModelLoadFailed', `the draft model ${settings.model} has no GGUF file here`);
    let model: LlamaModel;
    try {
      model = await llama.loadModel({ modelPath: opts.draftFile });
    } catch (err) {
      throw new EngineError('ModelLoadFailed', `llama.cpp could not load the draft model ${settings.model}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    const mismatch = tokenizerMismatch(target, model);
    if (mismatch) {
      await model.dispose();
      throw new EngineError(
        'DraftTokenizerMismatch',
        `the draft model ${settings.model} does not share the target's tokenizer: ${mismatch}`,
      );
    }
    const context = await model.createContext({ contextSize: opts.contextSize, sequences: opts.sequences, threads: opts.threads });
    releaseThreadsAtOnce(context);
    return new SpeculativeDecoding(settings, lib, { model, context });
  }

  /** Options for the context's getSequence(): each target sequence gets a predictor of its own. */
  sequenceOptions(): { tokenPredictor: TokenPredictor } {
    const s = this.settings;
    if (s.type === 'input_lookup') {
      return { tokenPredictor: new this.lib.InputLookupTokenPredictor({ predictionLength: { max: s.maxDraftTokens ?? 3 } }) };
    }
    return {
      tokenPredictor: new this.lib.DraftSequenceTokenPredictor(this.draft!.context.getSequence(), {
        // Drafted ahead and waited for, as llama.cpp's server drafts: on a few CPU cores a draft
        // that runs beside the target only takes its threads (node-llama-cpp's default, 0, lets the
        // target outrun the draft). A draft stops early at a token it is unsure of (minConfidence).
        maxTokens: s.maxDraftTokens ?? DEFAULT_DRAFT_TOKENS,
        minTokens: s.minDraftTokens ?? s.maxDraftTokens ?? DEFAULT_DRAFT_TOKENS,
        minConfidence: s.minConfidence,
        // The draft takes the target's sampling options, but a TokenBias belongs to one model
        // (node-llama-cpp throws, out of band, where another uses it): the draft drafts unbiased,
        // and the target, which applies the bias, rejects what the bias rules out.
        evaluateOptions: { tokenBias: undefined },
      }),
    };
  }

  /** The target's sequences dispose their predictors (and the draft sequences with them). */
  async dispose(): Promise<void> {
    await this.draft?.context.dispose();
    await this.draft?.model.dispose();
  }
}

/** What the sequence's predictions have been so far; `since` gives those of one generation. */
export function draftCounts(sequence: LlamaContextSequence, since?: DraftCounts): DraftCounts {
  const { validated, refuted } = sequence.tokenPredictions;
  return { accepted: validated - (since?.accepted ?? 0), rejected: refuted - (since?.rejected ?? 0) };
}
