/**
 * What node-llama-cpp's LlamaChat does to a chat's answer beyond drawing its tokens, where exact
 * decoding (./exact-decoding.ts) can do the same: it stops at an end-of-generation token and at
 * the chat wrapper's stop triggers, and drops a few leading whitespace characters of the answer
 * (the wrapper's "ignore start text"). A chat whose wrapper asks for more (segments such as a
 * reasoning model's thoughts, prefix triggers, re-rendering, function-calling modes, or a stop
 * trigger that is a special token other than an end one) is left to LlamaChat.
 */
import type { ChatWrapperGeneratedContextState, ChatWrapperSettings, LlamaText, Token, Tokenizer } from 'node-llama-cpp';

/** The rules an exactly decoded chat follows to end and shape its text as LlamaChat would. */
export interface ChatEndings {
  /** Texts that end the answer, cut from it as stop strings are. */
  stops: string[];
  /** Texts dropped from the answer's very start (the longest that fits), as LlamaChat drops them. */
  ignoredAtStart: string[];
}

/** A trigger resolved as LlamaChat resolves it: text, and special tokens as token ids. */
export type ResolvedTrigger = ReadonlyArray<string | Token>;

/**
 * The endings for a chat from its wrapper's resolved triggers, or undefined where LlamaChat must
 * decode it. A trigger that begins with an end-of-generation token needs nothing: decoding stops at
 * that token already. A trigger of text alone becomes a stop string. Any other (a special token
 * that does not end generation) could be drawn and not stop, so the chat keeps LlamaChat.
 */
export function chatEndingsOf(
  triggers: { stops: readonly ResolvedTrigger[]; ignoredAtStart: readonly ResolvedTrigger[]; needsLlamaChat: boolean },
  isEndToken: (token: Token) => boolean,
): ChatEndings | undefined {
  if (triggers.needsLlamaChat) return undefined;
  const stops: string[] = [];
  for (const trigger of triggers.stops) {
    const first = trigger[0];
    if (first === undefined) continue;
    if (typeof first === 'number' && isEndToken(first)) continue;
    const text = textOnly(trigger);
    if (text === undefined) return undefined;
    if (text !== '') stops.push(text);
  }
  const ignoredAtStart: string[] = [];
  for (const trigger of triggers.ignoredAtStart) {
    const text = textOnly(trigger);
    if (text === undefined) return undefined;
    if (text !== '') ignoredAtStart.push(text);
  }
  return { stops, ignoredAtStart };
}

function textOnly(trigger: ResolvedTrigger): string | undefined {
  return trigger.every((part) => typeof part === 'string') ? trigger.join('') : undefined;
}

/** What of node-llama-cpp's text classes resolving a trigger needs. */
export interface TriggerTextClasses {
  SpecialToken: abstract new (...args: never[]) => { tokenize(tokenizer: Tokenizer): Token[] };
  SpecialTokensText: abstract new (...args: never[]) => { tokenizeSpecialTokensOnly(tokenizer: Tokenizer): (string | Token)[] };
}

/** A wrapper's trigger as LlamaChat's stop detector resolves it: plain text kept, special tokens to their ids. */
export function resolveTrigger(text: LlamaText, tokenizer: Tokenizer, classes: TriggerTextClasses): ResolvedTrigger {
  return text.values.flatMap((value): (string | Token)[] => {
    if (typeof value === 'string') return value === '' ? [] : [value];
    if (value instanceof classes.SpecialToken) return value.tokenize(tokenizer);
    if (value instanceof classes.SpecialTokensText) return value.tokenizeSpecialTokensOnly(tokenizer);
    return [];
  });
}

/** The chat's endings from its wrapper's context state and settings (undefined: LlamaChat decodes it). */
export function chatEndings(
  state: ChatWrapperGeneratedContextState,
  settings: Pick<ChatWrapperSettings, 'segments'>,
  tokenizer: Tokenizer,
  classes: TriggerTextClasses,
  isEndToken: (token: Token) => boolean,
): ChatEndings | undefined {
  const segmented = settings.segments?.thought != null || settings.segments?.comment != null;
  const rewrites =
    state.prefixTriggers != null ||
    state.noPrefixTrigger != null ||
    state.rerender != null ||
    state.functionCall?.initiallyEngaged === true;
  const resolve = (text: LlamaText) => resolveTrigger(text, tokenizer, classes);
  return chatEndingsOf(
    {
      stops: state.stopGenerationTriggers.map(resolve),
      ignoredAtStart: (state.ignoreStartText ?? []).map(resolve),
      needsLlamaChat: segmented || rewrites,
    },
    isEndToken,
  );
}

/**
 * The answer's start as LlamaChat gives it: text is held while it may still grow into one of the
 * ignored texts; then the longest ignored text it begins with is dropped and the rest goes on.
 * Where generation ends while text is held, that text was all ignored, and nothing is given.
 */
export class StartTrim {
  private held = '';
  private done: boolean;

  constructor(private readonly ignored: readonly string[]) {
    this.done = ignored.length === 0;
  }

  /** The text of `chunk` to stream ('' while held or dropped). */
  take(chunk: string): string {
    if (this.done) return chunk;
    const text = this.held + chunk;
    if (this.ignored.some((t) => t.length > text.length && t.startsWith(text))) {
      this.held = text;
      return '';
    }
    this.done = true;
    this.held = '';
    const dropped = Math.max(0, ...this.ignored.filter((t) => text.startsWith(t)).map((t) => t.length));
    return text.slice(dropped);
  }
}
