/**
 * Which token bias a generation samples with at each step: until min_tokens the end-of-text tokens
 * are banned; under a JSON schema the last tokens of the budget favour closing quotes and
 * brackets, so the JSON ends complete instead of being cut off mid-string (as a model with no
 * sense of the budget, or random weights, would otherwise do); otherwise none.
 */
import type { LlamaModel, Token, TokenBias } from 'node-llama-cpp';
import type { JsonSchema } from '../../domain/tasks/json-schema';
import { closingOf, wrapUpBias } from './grammar';
import type { TokenLimits } from './token-budget';

export type BiasStage = 'holdEnd' | 'wrapUp' | 'none';

/**
 * The output token count from which a schema's JSON is wrapped up: room for its closing (the text
 * in the model's tokens, `countTokens`, a character each where none is given; the forced values a
 * character each), and a margin.
 */
export function wrapUpFrom(
  schema: JsonSchema | undefined,
  maxTokens: number,
  countTokens: (text: string) => number = (text) => text.length,
): number {
  if (!schema) return Infinity;
  const closing = closingOf(schema);
  return maxTokens - (countTokens(closing.text) + closing.valueChars + 8);
}

/** The stage a generation is in after `outputTokens` (the continued text's included). */
export function biasStage(outputTokens: number, minTokens: number, wrapUpAt: number, canWrapUp: boolean): BiasStage {
  return outputTokens < minTokens ? 'holdEnd' : canWrapUp && outputTokens >= wrapUpAt ? 'wrapUp' : 'none';
}

/** The bias for each stage, built once per generation: node-llama-cpp asks for it at every token. */
export function tokenBiasPolicy(
  model: LlamaModel,
  Bias: typeof TokenBias,
  schema: JsonSchema | undefined,
  limits: TokenLimits,
): (outputTokens: number) => TokenBias {
  const endTokens = [model.tokens.eos, model.tokens.eot].filter((t): t is Token => t != null);
  const holdEnd = new Bias(model.tokenizer);
  for (const t of endTokens) holdEnd.set(t, 'never');
  const none = new Bias(model.tokenizer);
  const closing = schema ? wrapUpBias(model, Bias) : undefined;
  const wrapUpAt = wrapUpFrom(schema, limits.max_tokens, (text) => model.tokenize(text).length);
  return (outputTokens) => {
    const stage = biasStage(outputTokens, limits.min_tokens, wrapUpAt, closing !== undefined);
    return stage === 'holdEnd' ? holdEnd : stage === 'wrapUp' && closing ? closing : none;
  };
}
