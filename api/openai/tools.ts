/**
 * OpenAI's structured output and tool calling, in the terms of Kiln's text-generation task:
 * `response_format` and forced tool calls become the task's `json_schema` input (a grammar in
 * the engine), the tools are described to the model in a system message, and the calls come
 * back as JSON text `{"name": …, "arguments": {…}}` that this module turns into `tool_calls`.
 * Tool calls and tool results in the history are rendered the same way, so the model sees the
 * conversation in the form it is asked to answer in.
 */
import type { JsonSchema } from '../../domain/tasks/json-schema';
import type { ChatMessage } from '../../domain/tasks/text-generation';
import type { OpenAiMessage, ResponseFormat, Tool, ToolCall, ToolChoice } from './protocol';

/** How the answer is read: plain text, or tool calls that the model must (`forced`) or may (`auto`) make. */
export type ToolMode = 'none' | 'auto' | 'forced';

export interface EngineChat {
  messages: ChatMessage[];
  json_schema?: JsonSchema;
  toolMode: ToolMode;
}

/** The JSON of one call of `t`: its name, then arguments that follow its parameters schema. */
function callSchema(t: Tool): JsonSchema {
  return {
    type: 'object',
    properties: { name: { const: t.function.name }, arguments: t.function.parameters ?? { type: 'object' } },
    required: ['name', 'arguments'],
    additionalProperties: false,
  };
}

function toolsPrompt(tools: Tool[], forced: boolean, parallel: boolean): string {
  const list = tools
    .map(
      (t) =>
        `- ${t.function.name}: ${t.function.description ?? ''}\n  parameters (JSON Schema): ${JSON.stringify(t.function.parameters ?? { type: 'object' })}`,
    )
    .join('\n');
  const shape = parallel
    ? 'a JSON array of objects {"name": <function name>, "arguments": {...}}'
    : 'one JSON object {"name": <function name>, "arguments": {...}}';
  return `You can call these functions:\n${list}\n${forced ? 'Call' : 'To call'} ${forced ? 'one of them now' : 'one'}: answer with only ${shape}, nothing else.${
    forced ? '' : ' Otherwise answer in plain text.'
  }`;
}

/** The text the model would have written for these calls (in the history sent back). */
function renderCalls(calls: ToolCall[]): string {
  const rendered = calls.map((c) => {
    let args: unknown = c.function.arguments;
    try {
      args = JSON.parse(c.function.arguments);
    } catch {
      // Arguments that are not JSON stay the string they were.
    }
    return { name: c.function.name, arguments: args };
  });
  return JSON.stringify(rendered.length === 1 ? rendered[0] : rendered);
}

/** The history in the task's roles: calls as the model writes them, results as user turns naming their call. */
function engineMessages(history: OpenAiMessage[]): ChatMessage[] {
  const names = new Map<string, string>();
  for (const m of history) if (m.role === 'assistant') for (const c of m.tool_calls ?? []) names.set(c.id, c.function.name);
  return history.map((m) => {
    switch (m.role) {
      case 'developer':
        return { role: 'system', content: m.content };
      case 'assistant':
        return { role: 'assistant', content: m.tool_calls?.length ? renderCalls(m.tool_calls) : (m.content ?? '') };
      case 'tool':
        return { role: 'user', content: `Result of ${names.get(m.tool_call_id) ?? 'the function'} (call ${m.tool_call_id}): ${m.content}` };
      default:
        return { role: m.role, content: m.content };
    }
  });
}

/** The grammar `response_format` asks for, if any. */
function formatSchema(format: ResponseFormat | null | undefined): JsonSchema | undefined {
  if (format?.type === 'json_object') return { type: 'object' };
  if (format?.type === 'json_schema') return format.json_schema.schema ?? { type: 'object' };
  return undefined;
}

/** Tells the model about the tools: appended to the first system message, or a system message of its own. */
function addInstructions(messages: ChatMessage[], instructions: string): void {
  const system = messages.findIndex((m) => m.role === 'system');
  if (system >= 0) messages[system] = { role: 'system', content: `${messages[system].content}\n\n${instructions}` };
  else messages.unshift({ role: 'system', content: instructions });
}

/**
 * The text-generation input for a chat with optional response_format and tools. With
 * tool_choice `required` or a named function the grammar forces a call (to that function);
 * with `auto` the model is told about the tools and its answer is read as a call if it is one;
 * with `none` (or no tools) the tools are not mentioned at all.
 */
export function engineChat(body: {
  messages: OpenAiMessage[];
  response_format?: ResponseFormat | null;
  tools?: Tool[] | null;
  tool_choice?: ToolChoice | null;
  parallel_tool_calls?: boolean | null;
}): EngineChat {
  const tools = body.tools ?? [];
  const choice = body.tool_choice ?? (tools.length > 0 ? 'auto' : 'none');
  const messages = engineMessages(body.messages);
  const json_schema = formatSchema(body.response_format);
  if (choice === 'none' || tools.length === 0) return { messages, json_schema, toolMode: 'none' };

  const named = typeof choice === 'object' ? tools.filter((t) => t.function.name === choice.function.name) : tools;
  const forced = choice !== 'auto';
  const parallel = body.parallel_tool_calls === true && typeof choice !== 'object';
  addInstructions(messages, toolsPrompt(named, forced, parallel));
  if (!forced) return { messages, json_schema, toolMode: 'auto' };
  const one: JsonSchema = named.length === 1 ? callSchema(named[0]) : { anyOf: named.map(callSchema) };
  return { messages, json_schema: parallel ? { type: 'array', items: one, minItems: 1, maxItems: 8 } : one, toolMode: 'forced' };
}

/** The calls in a model's answer, or undefined when the answer is not (only) calls of known tools. */
export function parseToolCalls(text: string, tools: Tool[], idPrefix: string): ToolCall[] | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const calls = Array.isArray(value) ? value : [value];
  const known = new Set(tools.map((t) => t.function.name));
  const valid = calls.every(
    (c): c is { name: string; arguments: unknown } =>
      typeof c === 'object' &&
      c !== null &&
      known.has((c as { name?: unknown }).name as string) &&
      typeof (c as { arguments?: unknown }).arguments === 'object' &&
      (c as { arguments?: unknown }).arguments !== null,
  );
  if (!valid || calls.length === 0) return undefined;
  return (calls as Array<{ name: string; arguments: unknown }>).map((c, i) => ({
    id: `call_${idPrefix}_${i}`,
    type: 'function',
    function: { name: c.name, arguments: JSON.stringify(c.arguments) },
  }));
}

/** While an `auto` answer could still turn out to be a call, its text is held back from the stream. */
export function mayBeToolCall(textSoFar: string): boolean {
  const t = textSoFar.trimStart();
  return t === '' || t.startsWith('{') || t.startsWith('[');
}

/**
 * Whether an answer that parsed as no call is a call cut short (by max_tokens or the context):
 * a forced call always is, an `auto` answer is while it could still have been one. Its text is
 * the grammar's unfinished JSON, not an answer to show as content.
 */
export function isUnfinishedCall(text: string, mode: ToolMode, finish: 'stop' | 'length'): boolean {
  return finish === 'length' && (mode === 'forced' || (mode === 'auto' && mayBeToolCall(text)));
}
