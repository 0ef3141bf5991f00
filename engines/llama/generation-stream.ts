/**
 * What one generation has streamed so far: its output tokens, counted within max_tokens, and its
 * text, cleaned, cut at the first stop string and handed on as chunks. Where a stop string must
 * not show even in part (a chat template's own end text), text that may be its beginning is held
 * until it is not; it is held by whole chunks, so a chunk handed on is all the text of the tokens
 * counted when it goes out, as a continuation counts them.
 */
import type { Token } from 'node-llama-cpp';
import { endsInStopBeginning, firstStopAt } from './stop-strings';
import { cleanText } from './text';
import { withinMaxTokens } from './token-budget';

export interface StreamSettings {
  /** The start of the response an earlier attempt generated: its text and tokens count as output. */
  continues: string;
  continuedTokens: number;
  maxTokens: number;
  stops: readonly string[];
  /** Stop strings whose beginning is held back until the text goes on otherwise (also matched as stops). */
  heldStops?: readonly string[];
  detokenize: (tokens: Token[]) => string;
}

export interface StreamHooks {
  /** Each chunk as it is kept, with the output tokens so far. */
  onChunk?: (chunk: string, outputTokens: number) => void;
  /** The last token max_tokens allows has been drawn. */
  onLastToken: () => void;
  /** A stop string ended the text: nothing more is wanted. */
  onStop: () => void;
}

export class GenerationStream {
  readonly chunks: string[] = [];
  outputTokens: number;
  /** All the text so far, the continued text's included and a stop string not cut off. */
  text: string;
  /** A stop string ended the text: later chunks are dropped. */
  stopped = false;
  /** When the first chunk came (performance.now()), or null before it. */
  firstChunkAt: number | null = null;
  /** The tokens kept of the last ones drawn, where they went past max_tokens. */
  private clipped?: Token[];
  /** How much of `text` has gone out (the continued text counts as gone). */
  private streamedLength: number;

  constructor(
    private readonly settings: StreamSettings,
    private readonly hooks: StreamHooks,
  ) {
    this.text = settings.continues;
    this.streamedLength = settings.continues.length;
    this.outputTokens = settings.continuedTokens;
  }

  /** node-llama-cpp's onToken: counts what was drawn, up to max_tokens. */
  countTokens(tokens: Token[]): void {
    const { counted, kept } = withinMaxTokens(tokens, this.outputTokens, this.settings.maxTokens);
    if (kept) this.clipped = kept;
    this.outputTokens += counted;
    // The last token: this sequence decodes nothing more, so the others need not wait for it.
    if (this.outputTokens >= this.settings.maxTokens) this.hooks.onLastToken();
  }

  /** node-llama-cpp's onTextChunk: the text of the tokens last counted. */
  takeText(decoded: string): void {
    // A clipped token may end inside a character: what is incomplete there is dropped.
    const chunk = cleanText(this.clipped ? this.settings.detokenize(this.clipped) : decoded);
    this.clipped = undefined;
    if (this.stopped || chunk === '') return;
    this.firstChunkAt ??= performance.now();
    const { stops, heldStops = [] } = this.settings;
    const before = this.text.length;
    this.text += chunk;
    const stopAt = firstStopAt(this.text, before, [...stops, ...heldStops]);
    this.stopped = stopAt >= 0;
    const end = this.stopped ? stopAt : endsInStopBeginning(this.text, heldStops) ? this.streamedLength : this.text.length;
    this.emitUpTo(end);
    if (this.stopped) this.hooks.onStop();
  }

  /** The generation ended: text held for a stop string that did not come goes out. */
  flush(): void {
    if (!this.stopped) this.emitUpTo(this.text.length);
  }

  private emitUpTo(end: number): void {
    if (end <= this.streamedLength) return;
    const chunk = this.text.slice(this.streamedLength, end);
    this.streamedLength = end;
    this.emit(chunk);
  }

  private emit(chunk: string): void {
    this.chunks.push(chunk);
    this.hooks.onChunk?.(chunk, this.outputTokens);
  }
}
