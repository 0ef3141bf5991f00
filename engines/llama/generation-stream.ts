/**
 * What one generation has streamed so far: its output tokens, counted within max_tokens, and its
 * text, cleaned, cut at the first stop string and handed on as chunks.
 */
import type { Token } from 'node-llama-cpp';
import { cutAtStop } from './stop-strings';
import { cleanText } from './text';
import { withinMaxTokens } from './token-budget';

export interface StreamSettings {
  /** The start of the response an earlier attempt generated: its text and tokens count as output. */
  continues: string;
  continuedTokens: number;
  maxTokens: number;
  stops: readonly string[];
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

  constructor(
    private readonly settings: StreamSettings,
    private readonly hooks: StreamHooks,
  ) {
    this.text = settings.continues;
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
    const { keep, stopped } = cutAtStop(this.text, chunk, this.settings.stops);
    this.text += chunk;
    this.stopped = stopped;
    if (keep !== '') this.emit(keep);
    if (stopped) this.hooks.onStop();
  }

  private emit(chunk: string): void {
    this.chunks.push(chunk);
    this.hooks.onChunk?.(chunk, this.outputTokens);
  }
}
