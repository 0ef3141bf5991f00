/**
 * Text completions as Kiln predictions: a prompt becomes a text-generation input, and the
 * prediction's result a `text_completion`, streamed or whole.
 */
import type { ResolvedVersion } from '../../db/models';
import type { PredictionRow } from '../../db/predictions';
import type { CompletionRequest, FinishReason, TextCompletion } from './protocol';
import { finishReason, type Limit, limitOf, outputText, type ResponseHead, responseHead, usage } from './result';
import { samplingInput } from './sampling';
import { type ChunkOf, type StreamShape, textShape } from './stream-shape';

/** A completion request in Kiln's terms: the task input, and what its answer is shaped by. */
export interface CompletionPlan {
  input: Record<string, unknown>;
  model: string;
  limit: Limit;
}

export function completionPlan(body: CompletionRequest, resolved: Pick<ResolvedVersion, 'version'>): CompletionPlan {
  // OpenAI's default for completions, much shorter than a chat's.
  const maxTokens = body.max_tokens ?? 16;
  return { input: { prompt: body.prompt, ...samplingInput(body, maxTokens) }, model: body.model, limit: limitOf(resolved, maxTokens) };
}

const completionHead = (plan: CompletionPlan, row: Pick<PredictionRow, 'id' | 'createdAt'>) => responseHead('cmpl', row, plan.model);

/** A streamed chunk and the whole answer have the same shape: a piece of the text, or all of it. */
function completionChoice(head: ResponseHead, text: string | null, finish: FinishReason | null): Omit<TextCompletion, 'usage'> {
  return {
    id: head.id,
    object: 'text_completion',
    created: head.created,
    model: head.model,
    choices: [{ index: 0, text: text ?? '', finish_reason: finish, logprobs: null }],
  };
}

export function completionChunkOf(head: ResponseHead): ChunkOf {
  return (text, finish) => completionChoice(head, text, finish);
}

export function completionStream(plan: CompletionPlan, row: Pick<PredictionRow, 'id' | 'createdAt'>): StreamShape {
  return textShape(completionChunkOf(completionHead(plan, row)), plan.limit);
}

export function textCompletion(
  plan: CompletionPlan,
  row: Pick<PredictionRow, 'id' | 'createdAt'>,
  done: Pick<PredictionRow, 'output' | 'metrics'>,
): TextCompletion {
  return { ...completionChoice(completionHead(plan, row), outputText(done), finishReason(done, plan.limit)), usage: usage(done) };
}
