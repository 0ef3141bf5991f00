/**
 * min_tokens where llama.cpp ends a completion too soon. It sometimes ends on end-of-sequence
 * despite the ban: the nucleus (top_p) is taken before the ban, so where it holds only end tokens
 * nothing else can be drawn. Generation carries on from the text so far (the prefix is still in
 * the context); after a call that added nothing, the rest up to min_tokens is drawn from the
 * whole distribution (a token at a time would cost a call per token where end tokens keep
 * dominating).
 */
import type { TokenLimits } from './token-budget';

/** One more completion call from the text so far, with these overrides; it answers its stop reason. */
export type CompleteMore = (overrides: { maxTokens: number; topP?: 1 }) => Promise<string>;

/** Calls `more` until min_tokens is reached, the generation is aborted or nothing more comes; the final stop reason. */
export async function topUpToMinTokens(
  stopReason: string,
  progress: { readonly outputTokens: number },
  limits: TokenLimits,
  continuedTokens: number,
  signal: AbortSignal,
  more: CompleteMore,
): Promise<string> {
  let stalled = progress.outputTokens === continuedTokens;
  while (stopReason === 'eogToken' && progress.outputTokens < limits.min_tokens && !signal.aborted) {
    const before = progress.outputTokens;
    if (stalled) {
      await more({ topP: 1, maxTokens: limits.min_tokens - before });
      // Nothing can be drawn at all: end short rather than spin.
      if (progress.outputTokens === before) break;
      stalled = false;
      // Past min_tokens the model was free to end, as it was about to.
      stopReason = progress.outputTokens >= limits.max_tokens ? 'maxTokens' : 'eogToken';
      continue;
    }
    stopReason = await more({ maxTokens: limits.max_tokens - before });
    stalled = progress.outputTokens === before;
  }
  return stopReason;
}
