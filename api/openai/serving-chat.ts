/**
 * Chat completions as Kiln predictions: a chat request becomes a text-generation input, and the
 * prediction's result a `chat.completion`, or a stream of `chat.completion.chunk`s.
 */
import type { ResolvedVersion } from '../../db/models';
import type { PredictionRow } from '../../db/predictions';
import type { ChatCompletion, ChatRequest, Tool } from './protocol';
import { finishReason, type Limit, limitOf, outputText, type ResponseHead, responseHead, usage } from './result';
import { samplingInput } from './sampling';
import { type Chunk, type ChunkOf, type StreamShape, textShape, toolCallShape } from './stream-shape';
import { engineChat, isUnfinishedCall, parseToolCalls, type ToolMode } from './tools';

/** A chat request in Kiln's terms: the task input, and what its answer is read and shaped by. */
export interface ChatPlan {
  input: Record<string, unknown>;
  model: string;
  limit: Limit;
  toolMode: ToolMode;
  tools: Tool[];
}

export function chatPlan(body: ChatRequest, resolved: Pick<ResolvedVersion, 'version'>): ChatPlan {
  const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? 512;
  const { messages, json_schema, toolMode } = engineChat(body);
  return {
    input: { messages, ...(json_schema ? { json_schema } : {}), ...samplingInput(body, maxTokens) },
    model: body.model,
    limit: limitOf(resolved, maxTokens),
    toolMode,
    tools: body.tools ?? [],
  };
}

const chatHead = (plan: ChatPlan, row: Pick<PredictionRow, 'id' | 'createdAt'>) => responseHead('chatcmpl', row, plan.model);

export function chatChunkOf(head: ResponseHead): ChunkOf {
  return (content, finish) => ({
    id: head.id,
    object: 'chat.completion.chunk',
    created: head.created,
    model: head.model,
    choices: [{ index: 0, delta: content === null ? {} : { content }, finish_reason: finish, logprobs: null }],
  });
}

/** The chunk a chat's stream opens with: the assistant's role and no text yet. */
export function roleChunk(chunk: ChunkOf): Chunk {
  return { ...chunk('', null), choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null, logprobs: null }] };
}

/** The chunks of a chat's stream: text, or tool calls once the answer turns out to be them. */
export function chatStream(plan: ChatPlan, row: Pick<PredictionRow, 'id' | 'createdAt'>): StreamShape {
  const chunk = chatChunkOf(chatHead(plan, row));
  const first = roleChunk(chunk);
  if (plan.toolMode === 'none') return textShape(chunk, plan.limit, first);
  return toolCallShape(chunk, plan.limit, { mode: plan.toolMode, tools: plan.tools, idPrefix: row.id }, first);
}

/** The whole answer: the text, or the tool calls read from it. */
export function chatCompletion(
  plan: ChatPlan,
  row: Pick<PredictionRow, 'id' | 'createdAt'>,
  done: Pick<PredictionRow, 'output' | 'metrics'>,
): ChatCompletion {
  const { id, created, model } = chatHead(plan, row);
  const text = outputText(done);
  const calls = plan.toolMode === 'none' ? undefined : parseToolCalls(text.trim(), plan.tools, row.id);
  const finish = finishReason(done, plan.limit);
  const content = !calls && isUnfinishedCall(text, plan.toolMode, finish) ? null : text;
  return {
    id,
    object: 'chat.completion',
    created,
    model,
    choices: [
      {
        index: 0,
        message: calls
          ? { role: 'assistant', content: null, tool_calls: calls, refusal: null }
          : { role: 'assistant', content, refusal: null },
        finish_reason: calls ? 'tool_calls' : finish,
        logprobs: null,
      },
    ],
    usage: usage(done),
  };
}
