/** A request's chat messages as node-llama-cpp's chat history. */
import type { ChatHistoryItem } from 'node-llama-cpp';
import type { ChatMessage } from '../../domain/tasks/text-generation';

/**
 * OpenAI-style messages to node-llama-cpp's chat history, ending with the model's turn.
 * `continues`: the start of the model's response, which generation goes on from (LlamaChat
 * continues a last model item).
 */
export function toChatHistory(messages: ChatMessage[], continues = ''): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = messages.map((m) =>
    m.role === 'system'
      ? { type: 'system', text: m.content }
      : m.role === 'user'
        ? { type: 'user', text: m.content }
        : { type: 'model', response: [m.content] },
  );
  history.push({ type: 'model', response: continues ? [continues] : [] });
  return history;
}
