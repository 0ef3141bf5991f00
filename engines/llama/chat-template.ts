/**
 * The chat template a model is served with: the one stored in its GGUF
 * (`tokenizer.chat_template`), rendered as llama.cpp renders it, so a chat evaluates the tokens
 * llama-server would (the model's own default system prompt, special tokens and generation
 * prompt included). A model without a template, or with one node-llama-cpp's Jinja cannot
 * render, gets the wrapper node-llama-cpp resolves from its architecture and name.
 */
import type { ChatWrapper, LlamaModel } from 'node-llama-cpp';

type NodeLlamaCpp = typeof import('node-llama-cpp');

const wrappers = new WeakMap<LlamaModel, ChatWrapper>();

/** The GGUF's own chat template, where it has one. */
export function storedChatTemplate(model: Pick<LlamaModel, 'fileInfo'>): string | undefined {
  const template = (model.fileInfo.metadata as { tokenizer?: { chat_template?: unknown } }).tokenizer?.chat_template;
  return typeof template === 'string' && template.trim() !== '' ? template : undefined;
}

/** The model's chat wrapper, made once per loaded model. */
export function chatWrapperOf(nlc: Pick<NodeLlamaCpp, 'JinjaTemplateChatWrapper' | 'resolveChatWrapper'>, model: LlamaModel): ChatWrapper {
  let wrapper = wrappers.get(model);
  if (wrapper) return wrapper;
  const template = storedChatTemplate(model);
  try {
    wrapper = template ? new nlc.JinjaTemplateChatWrapper({ template, tokenizer: model.tokenizer }) : nlc.resolveChatWrapper(model);
  } catch {
    // A template this Jinja cannot parse: the architecture's wrapper is the next best rendering.
    wrapper = nlc.resolveChatWrapper(model);
  }
  wrappers.set(model, wrapper);
  return wrapper;
}
