/**
 * A Responses conversation in chat terms: the input items of a response and of the responses it
 * continues (with their output items) become the chat messages the text-generation task reads,
 * so a chain runs through the same prompt, tools and grammar as chat completions.
 */
import type { OpenAiMessage, ToolCall } from './protocol';
import type { OutputItem, ResolvedInputItem, StoredInputItem } from './responses-protocol';

/** The request's input as stored items, each with an id (the caller's, else one made from the prediction id). */
export function storedInputItems(input: string | ResolvedInputItem[], predictionId: string): StoredInputItem[] {
  const items: ResolvedInputItem[] = typeof input === 'string' ? [{ type: 'message', role: 'user', content: input }] : input;
  return items.map((item, i): StoredInputItem => {
    const id = item.id ?? `${item.type === 'message' ? 'msg' : item.type === 'function_call' ? 'fc' : 'fco'}_${predictionId}_in${i}`;
    if (item.type === 'message') {
      const type = item.role === 'assistant' ? 'output_text' : 'input_text';
      return { ...item, id, content: [{ type, text: item.content }] };
    }
    return { ...item, id };
  });
}

/** One turn of a chain: what the caller sent, then what the model answered (none yet for the turn being asked). */
export interface Turn {
  inputItems: StoredInputItem[];
  outputItems: OutputItem[];
}

/**
 * The chat messages of a chain, oldest turn first, after the request's own instructions (those of
 * earlier responses are not carried over, as OpenAI documents). Consecutive function calls are one
 * assistant message with several tool calls.
 */
export function conversationMessages(turns: Turn[], instructions: string | null | undefined): OpenAiMessage[] {
  const messages: OpenAiMessage[] = instructions ? [{ role: 'system', content: instructions }] : [];
  const call = (c: { call_id: string; name: string; arguments: string }): ToolCall => ({
    id: c.call_id,
    type: 'function',
    function: { name: c.name, arguments: c.arguments },
  });
  const push = (item: StoredInputItem | OutputItem) => {
    if (item.type === 'message') {
      const content = item.content.map((p) => p.text).join('');
      messages.push(item.role === 'assistant' ? { role: 'assistant', content } : { role: item.role, content });
    } else if (item.type === 'function_call') {
      const last = messages.at(-1);
      if (last?.role === 'assistant' && last.tool_calls?.length) last.tool_calls.push(call(item));
      else messages.push({ role: 'assistant', content: null, tool_calls: [call(item)] });
    } else {
      messages.push({ role: 'tool', content: item.output, tool_call_id: item.call_id });
    }
  };
  for (const turn of turns) {
    turn.inputItems.forEach(push);
    turn.outputItems.forEach(push);
  }
  return messages;
}
