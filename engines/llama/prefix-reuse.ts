/**
 * Prefix reuse, token side: what a completion's prompt will evaluate (to pick the sequence that
 * holds most of it) and how many prompt tokens a generation found already evaluated.
 */
import type { LlamaModel, Token } from 'node-llama-cpp';
import { sharedPrefix } from './sequence-pool';

/**
 * The tokens LlamaCompletion evaluates for `prompt`, as near as its public API tells: a beginning
 * token where the model wants one, then the text without the leading space the tokenizer adds.
 */
export function promptProbe(model: LlamaModel, prompt: string): Token[] {
  const bos = model.tokens.bos;
  if (bos == null || !model.tokens.shouldPrependBosToken) return model.tokenizer(prompt);
  return [bos, ...model.tokenizer(prompt, false, 'trimLeadingSpace')];
}

/**
 * Prompt tokens reused: `held` is what the sequence held when lent, `evaluated` what it holds once
 * the prompt is in (at the first generated token). node-llama-cpp keeps the shared prefix and
 * decodes the prompt's last token again in any case, so a whole match counts one fewer.
 */
export function cachedPromptTokens(held: readonly Token[], evaluated: readonly Token[]): number {
  return Math.max(0, Math.min(sharedPrefix(held, evaluated), evaluated.length - 1));
}
