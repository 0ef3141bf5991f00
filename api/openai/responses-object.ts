/**
 * A response in OpenAI's terms, read from its row and its prediction: the plan its request becomes
 * (the same chat input, tools and grammar as chat completions), its output items, its status, and
 * the whole `response` object. Everything here is a pure function of those two rows, so every API
 * process, before or after a restart, answers the same.
 */
import { figure, type PredictionMetrics } from '../../domain/prediction-metrics';
import type { OpenAiMessage, Tool } from './protocol';
import type { CreateResponseRequest, OutputItem, ResponseObject, ResponseStatus, ResponseUsage } from './responses-protocol';
import { finishReason, type Limit, limitOf, outputText, unixSeconds } from './result';
import { samplingInput } from './sampling';
import { engineChat, isUnfinishedCall, parseToolCalls, type ToolMode } from './tools';

/** The default cap on an answer, as chat completions has. */
export const DEFAULT_MAX_OUTPUT_TOKENS = 512;

/** What a response's prediction is read by: its tools, how its answer is read, what may end it. */
export interface ResponsePlan {
  tools: Tool[];
  toolMode: ToolMode;
  limit: Limit;
}

/** The prediction a response reads from: the fields of its row that matter here. */
export interface PredictionState {
  id: string;
  status: string;
  output: unknown;
  error: string | null;
  metrics: PredictionMetrics;
  completedAt: Date | null;
}

/** The stored request: what the create said, echoed in the response object. */
export type StoredRequest = Omit<CreateResponseRequest, 'input'>;

/** The response row's fields the object is made of. */
export interface ResponseState {
  id: string;
  previousResponseId: string | null;
  request: StoredRequest;
  contextSize: number | null;
  createdAt: Date;
}

const chatTools = (request: StoredRequest): Tool[] =>
  (request.tools ?? []).map((t) => ({
    type: 'function',
    function: {
      name: t.name,
      ...(t.description != null ? { description: t.description } : {}),
      ...(t.parameters != null ? { parameters: t.parameters } : {}),
    },
  }));

const chatToolChoice = (request: StoredRequest) => {
  const choice = request.tool_choice;
  return typeof choice === 'object' && choice ? { type: 'function' as const, function: { name: choice.name } } : choice;
};

const chatFormat = (request: StoredRequest) => {
  const format = request.text?.format;
  if (format?.type !== 'json_schema') return format;
  return { type: 'json_schema' as const, json_schema: { name: format.name, schema: format.schema } };
};

/** The text-generation input of a response whose conversation is `messages`, and the plan to read its answer by. */
export function responseInput(
  request: StoredRequest,
  messages: OpenAiMessage[],
  contextSize: number | null,
): { input: Record<string, unknown>; plan: ResponsePlan } {
  const maxTokens = request.max_output_tokens ?? DEFAULT_MAX_OUTPUT_TOKENS;
  const chat = engineChat({
    messages,
    response_format: chatFormat(request),
    tools: chatTools(request),
    tool_choice: chatToolChoice(request),
    parallel_tool_calls: request.parallel_tool_calls,
  });
  return {
    input: {
      messages: chat.messages,
      ...(chat.json_schema ? { json_schema: chat.json_schema } : {}),
      ...samplingInput(request as { model: string }, maxTokens),
    },
    plan: { tools: chatTools(request), toolMode: chat.toolMode, limit: { maxTokens, contextSize: contextSize ?? undefined } },
  };
}

export function responsePlan(state: ResponseState): ResponsePlan {
  return responseInput(state.request, [], state.contextSize).plan;
}

export const contextSizeOf = (resolved: { version: { settings: Record<string, unknown> } }) => limitOf(resolved, 1).contextSize ?? null;

/** The response's status: its prediction's, in the Responses API's words. */
export function responseStatus(prediction: PredictionState, plan: ResponsePlan): ResponseStatus {
  switch (prediction.status) {
    case 'starting':
      return 'queued';
    case 'processing':
      return 'in_progress';
    case 'succeeded':
      return finishReason(prediction, plan.limit) === 'length' && outputItems(prediction, plan).every((i) => i.type === 'message')
        ? 'incomplete'
        : 'completed';
    case 'failed':
      return 'failed';
    default:
      // canceled, and aborted (never started before its deadline).
      return 'cancelled';
  }
}

/** The answer's items: the function calls it makes, else one assistant message (none until it succeeded). */
export function outputItems(prediction: PredictionState, plan: ResponsePlan): OutputItem[] {
  if (prediction.status !== 'succeeded') return [];
  const text = outputText(prediction);
  const calls = plan.toolMode === 'none' ? undefined : parseToolCalls(text.trim(), plan.tools, prediction.id);
  if (calls) {
    return calls.map((c, n) => ({
      type: 'function_call',
      id: `fc_${prediction.id}_${n}`,
      status: 'completed',
      call_id: c.id,
      name: c.function.name,
      arguments: c.function.arguments,
    }));
  }
  const finish = finishReason(prediction, plan.limit);
  const shown = isUnfinishedCall(text, plan.toolMode, finish) ? '' : text;
  return [messageItem(prediction.id, shown, finish === 'length' ? 'incomplete' : 'completed')];
}

export function messageItem(predictionId: string, text: string, status: 'in_progress' | 'completed' | 'incomplete'): OutputItem {
  return {
    type: 'message',
    id: `msg_${predictionId}`,
    status,
    role: 'assistant',
    content: status === 'in_progress' ? [] : [{ type: 'output_text', text, annotations: [], logprobs: [] }],
  };
}

function usageOf(prediction: PredictionState): ResponseUsage {
  const input = figure(prediction.metrics, 'input_token_count') ?? 0;
  const output = figure(prediction.metrics, 'output_token_count') ?? 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: figure(prediction.metrics, 'cached_tokens') ?? 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + output,
  };
}

/** The error of a failed response: a prompt too long for the context keeps OpenAI's code for it. */
function errorOf(prediction: PredictionState): ResponseObject['error'] {
  const message = prediction.error ?? 'the prediction failed';
  return { code: /context/i.test(message) ? 'context_length_exceeded' : 'server_error', message };
}

/** The `response` object; `status` overrides the prediction's (a stream's created and in_progress events). */
export function responseObject(
  state: ResponseState,
  prediction: PredictionState,
  status: ResponseStatus = responseStatus(prediction, responsePlan(state)),
): ResponseObject {
  const plan = responsePlan(state);
  const r = state.request;
  const finished = status === 'completed' || status === 'incomplete' || status === 'failed' || status === 'cancelled';
  return {
    id: state.id,
    object: 'response',
    created_at: unixSeconds(state.createdAt),
    completed_at: finished && prediction.completedAt ? unixSeconds(prediction.completedAt) : null,
    status,
    background: r.background ?? false,
    error: status === 'failed' ? errorOf(prediction) : null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: r.instructions ?? null,
    max_output_tokens: r.max_output_tokens ?? null,
    model: r.model,
    output: status === 'completed' || status === 'incomplete' ? outputItems(prediction, plan) : [],
    parallel_tool_calls: r.parallel_tool_calls ?? true,
    previous_response_id: state.previousResponseId,
    reasoning: { effort: null, summary: null },
    service_tier: r.service_tier ?? 'default',
    store: r.store ?? true,
    temperature: r.temperature ?? 1,
    top_p: r.top_p ?? 1,
    text: { format: r.text?.format ?? { type: 'text' }, verbosity: 'medium' },
    tool_choice: r.tool_choice ?? 'auto',
    tools: (r.tools ?? []).map((t) => ({
      ...t,
      description: t.description ?? null,
      parameters: t.parameters ?? null,
      strict: t.strict ?? true,
    })),
    truncation: 'disabled',
    usage: finished && status !== 'cancelled' ? usageOf(prediction) : null,
    metadata: r.metadata ?? {},
    user: r.user ?? null,
    prompt_cache_key: r.prompt_cache_key ?? null,
    safety_identifier: r.safety_identifier ?? null,
  };
}
