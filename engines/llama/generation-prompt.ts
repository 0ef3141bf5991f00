/**
 * What a request gives the model to read: a chat (its history, rendered with the model's chat
 * template) or a completion's prompt, with the prompt's tokens.
 */
import type { ChatHistoryItem, ChatWrapper, ChatWrapperGeneratedContextState, LlamaModel, Token } from 'node-llama-cpp';
import type { ChatMessage, TextGenerationInput } from '../../domain/tasks/text-generation';
import { toChatHistory } from './chat-history';
import { promptProbe } from './prefix-reuse';

export type GenerationPrompt =
  | {
      kind: 'chat';
      messages: ChatMessage[];
      history: ChatHistoryItem[];
      wrapper: ChatWrapper;
      /** The wrapper's rendering of the chat: its text, and how the answer ends (./chat-endings.ts). */
      state: ChatWrapperGeneratedContextState;
      tokens: Token[];
    }
  | { kind: 'completion'; text: string; tokens: Token[] };

/** The request's prompt; its tokens' count is the generation's input tokens. */
export function generationPrompt(
  model: LlamaModel,
  request: Pick<TextGenerationInput, 'prompt' | 'messages'>,
  resolveChatWrapper: (model: LlamaModel) => ChatWrapper,
): GenerationPrompt {
  if (!request.messages) return { kind: 'completion', text: request.prompt ?? '', tokens: model.tokenizer(request.prompt ?? '') };
  const wrapper = resolveChatWrapper(model);
  const history = toChatHistory(request.messages);
  const state = wrapper.generateContextState({ chatHistory: history });
  const tokens = state.contextText.tokenize(model.tokenizer);
  return { kind: 'chat', messages: request.messages, history, wrapper, state, tokens };
}

/**
 * The tokens the sequence pool compares with each sequence's to lend the one holding most of
 * them: a chat's rendered tokens, or what LlamaCompletion will evaluate for a completion.
 */
export function reuseProbe(model: LlamaModel, prompt: GenerationPrompt): Token[] {
  return prompt.kind === 'chat' ? prompt.tokens : promptProbe(model, prompt.text);
}

/** The chat to answer: where an earlier attempt's response is continued, it ends with that text. */
export function chatToAnswer(prompt: Extract<GenerationPrompt, { kind: 'chat' }>, continues: string): ChatHistoryItem[] {
  return continues ? toChatHistory(prompt.messages, continues) : prompt.history;
}
