/**
 * The chat template a model is served with: the one stored in its GGUF
 * (`tokenizer.chat_template`), rendered and tokenized as llama.cpp does, so a chat evaluates the
 * tokens llama-server would (the model's own default system prompt, special tokens and
 * generation prompt included; bench/chat-agreement.ts compares the two). A model without a
 * template, or with one node-llama-cpp's Jinja cannot render, gets the wrapper node-llama-cpp
 * resolves from its architecture and name.
 */
import type {
  ChatWrapper,
  ChatWrapperGenerateContextStateOptions,
  LlamaModel,
  LlamaText,
  LlamaTextValue,
  Token,
  Tokenizer,
} from 'node-llama-cpp';

type NodeLlamaCpp = typeof import('node-llama-cpp');

const wrappers = new WeakMap<LlamaModel, ChatWrapper>();

/** The GGUF's own chat template, where it has one. */
export function storedChatTemplate(model: Pick<LlamaModel, 'fileInfo'>): string | undefined {
  const template = (model.fileInfo.metadata as { tokenizer?: { chat_template?: unknown } }).tokenizer?.chat_template;
  return typeof template === 'string' && template.trim() !== '' ? template : undefined;
}

/** What cutAsLlamaCpp needs of node-llama-cpp's text classes. */
export interface LlamaTextClasses {
  LlamaText: (values: readonly LlamaTextValue[]) => LlamaText;
  SpecialTokensText: new (value: string) => { readonly value: string; tokenizeSpecialTokensOnly(tokenizer: Tokenizer): (string | Token)[] };
}

/**
 * A rendered chat cut where llama.cpp cuts it before tokenizing. llama-server tokenizes the
 * rendered prompt as one string with special tokens parsed: it splits the string at each special
 * token and tokenizes the text between two of them as one piece. node-llama-cpp's LlamaText
 * tokenizes the template's own text (SpecialTokensText) apart from the messages' text (plain
 * strings), so the BPE merges across each seam are lost: `user\n` then a message `  hi` gives
 * `\n`, `  `, `hi` where llama.cpp gives `\n  `, `hi`. Here the template's text is split at its
 * special tokens, each kept as a SpecialTokensText of its own, and the rest joins the messages'
 * text as plain strings, which LlamaText tokenizes together. A special token's text typed in a
 * message stays text (llama-server would parse it into the token).
 */
export function cutAsLlamaCpp(text: LlamaText, tokenizer: Tokenizer, classes: LlamaTextClasses): LlamaText {
  const values: LlamaTextValue[] = [];
  for (const value of text.values) {
    if (!(value instanceof classes.SpecialTokensText)) {
      values.push(value);
      continue;
    }
    for (const part of value.tokenizeSpecialTokensOnly(tokenizer)) {
      values.push(typeof part === 'string' ? part : (new classes.SpecialTokensText(tokenizer.detokenize([part], true)) as LlamaTextValue));
    }
  }
  return classes.LlamaText(values);
}

/** The GGUF template's wrapper, its rendered chats cut as llama.cpp cuts them (cutAsLlamaCpp). */
function templateWrapper(
  nlc: Pick<NodeLlamaCpp, 'JinjaTemplateChatWrapper' | 'LlamaText' | 'SpecialTokensText'>,
  template: string,
  tokenizer: Tokenizer,
): ChatWrapper {
  return new (class extends nlc.JinjaTemplateChatWrapper {
    override generateContextState(options: ChatWrapperGenerateContextStateOptions) {
      const state = super.generateContextState(options);
      return { ...state, contextText: cutAsLlamaCpp(state.contextText, tokenizer, nlc) };
    }
  })({ template, tokenizer });
}

/** The model's chat wrapper, made once per loaded model. */
export function chatWrapperOf(
  nlc: Pick<NodeLlamaCpp, 'JinjaTemplateChatWrapper' | 'resolveChatWrapper' | 'LlamaText' | 'SpecialTokensText'>,
  model: LlamaModel,
): ChatWrapper {
  let wrapper = wrappers.get(model);
  if (wrapper) return wrapper;
  const template = storedChatTemplate(model);
  try {
    wrapper = template ? templateWrapper(nlc, template, model.tokenizer) : nlc.resolveChatWrapper(model);
  } catch {
    // A template this Jinja cannot parse: the architecture's wrapper is the next best rendering.
    wrapper = nlc.resolveChatWrapper(model);
  }
  wrappers.set(model, wrapper);
  return wrapper;
}
