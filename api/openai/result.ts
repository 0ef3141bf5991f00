/**
 * What a finished prediction says in OpenAI's terms: its text, its token usage, why it stopped,
 * and the id and creation time its responses carry.
 */
import type { PredictionRow } from '../../db/predictions';
import { figure } from '../../domain/prediction-metrics';
import type { FinishReason, Usage } from './protocol';

/** The fields every response and chunk of one prediction starts with. */
export interface ResponseHead {
  /** `chatcmpl-<prediction id>` or `cmpl-<prediction id>`. */
  id: string;
  created: number;
  /** The model as the request named it. */
  model: string;
}

/** Seconds since the epoch, OpenAI's `created`. */
export const unixSeconds = (d: Date) => Math.floor(d.getTime() / 1000);

export function responseHead(prefix: string, row: Pick<PredictionRow, 'id' | 'createdAt'>, model: string): ResponseHead {
  return { id: `${prefix}-${row.id}`, created: unixSeconds(row.createdAt), model };
}

/** The generated text: a text-generation output is the list of its pieces. */
export const outputText = (row: Pick<PredictionRow, 'output'>) => (Array.isArray(row.output) ? row.output.join('') : '');

export function usage(row: Pick<PredictionRow, 'metrics'>): Usage {
  const prompt = figure(row.metrics, 'input_token_count') ?? 0;
  const completion = figure(row.metrics, 'output_token_count') ?? 0;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: figure(row.metrics, 'cached_tokens') ?? 0 },
  };
}

/** What may end an answer by length: max_tokens, or the model's context (which may cut max_tokens short). */
export interface Limit {
  maxTokens: number;
  contextSize?: number;
}

export function limitOf(resolved: { version: { settings: Record<string, unknown> } }, maxTokens: number): Limit {
  const contextSize = resolved.version.settings.contextSize;
  return { maxTokens, contextSize: typeof contextSize === 'number' ? contextSize : undefined };
}

/** `length` when the answer ran into max_tokens or filled the context, else `stop`. */
export function finishReason(row: Pick<PredictionRow, 'metrics'>, limit: Limit): Exclude<FinishReason, 'tool_calls'> {
  const output = figure(row.metrics, 'output_token_count') ?? 0;
  const used = (figure(row.metrics, 'input_token_count') ?? 0) + output;
  return output >= limit.maxTokens || (limit.contextSize !== undefined && used >= limit.contextSize) ? 'length' : 'stop';
}
