/**
 * A prompt goes into its sequence all but its last token, which the generation then evaluates on
 * its own, as it does when the whole prompt was found already evaluated (a reused prefix, a
 * restored snapshot). llama.cpp rounds a token evaluated in a batch of many differently from one
 * evaluated alone (its batched matrix kernels sum in another order), and a trained model's greedy
 * choice between two near-equal tokens follows that rounding: the last prompt token's logits, and
 * every token after them, would then depend on how much of the prompt was cached.
 */
import type { LlamaContextSequence, Token } from 'node-llama-cpp';

/** Tokens evaluated between two looks at the signal: a long prompt's evaluation stops soon after a cancel. */
const TOKENS_BETWEEN_CHECKS = 512;

export async function evaluatePromptButLast(sequence: LlamaContextSequence, prompt: readonly Token[], signal?: AbortSignal): Promise<void> {
  if (prompt.length < 2) return;
  const allButLast = prompt.slice(0, -1);
  // Keeps what the sequence holds of it and erases the rest (an earlier answer, another prompt's tail).
  await sequence.adaptStateToTokens(allButLast, false);
  while (sequence.nextTokenIndex < allButLast.length) {
    signal?.throwIfAborted();
    const from = sequence.nextTokenIndex;
    await sequence.evaluateWithoutGeneratingNewTokens(allButLast.slice(from, from + TOKENS_BETWEEN_CHECKS));
  }
}
