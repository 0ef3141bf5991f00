/** A chat rendered with the GGUF's template is cut for tokenizing where llama.cpp cuts it: at special tokens only. */
import type { LlamaText, Token, Tokenizer } from 'node-llama-cpp';
import { cutAsLlamaCpp, type LlamaTextClasses } from '../../engines/llama/chat-template';

const SPECIAL: Record<string, number> = { '<|im_start|>': 1, '<|im_end|>': 2 };
const textOf = (token: number) => Object.keys(SPECIAL).find((k) => SPECIAL[k] === token) ?? '';

/** node-llama-cpp's SpecialTokensText, as far as the cut uses it: its text split at the special tokens it holds. */
class SpecialText {
  constructor(readonly value: string) {}
  tokenizeSpecialTokensOnly(): (string | Token)[] {
    return this.value
      .split(/(<\|im_start\|>|<\|im_end\|>)/)
      .filter((part) => part !== '')
      .map((part) => (part in SPECIAL ? (SPECIAL[part] as Token) : part));
  }
}

const classes = { LlamaText: (values: readonly unknown[]) => ({ values }), SpecialTokensText: SpecialText } as unknown as LlamaTextClasses;
const tokenizer = {
  detokenize: (tokens: Token[], special?: boolean) => (special ? tokens.map(textOf).join('') : ''),
} as unknown as Tokenizer;
const rendered = (...values: unknown[]) => ({ values }) as unknown as LlamaText;
const cut = (text: LlamaText) =>
  (cutAsLlamaCpp(text, tokenizer, classes).values as unknown[]).map((v) => (v instanceof SpecialText ? { special: v.value } : v));

test("the template's text is split at its special tokens, and the text between two joins the message's as plain text", () => {
  const text = rendered(new SpecialText('<|im_start|>user\n'), '  spaces  \n', new SpecialText('<|im_end|>\n<|im_start|>assistant\n'));
  expect(cut(text)).toEqual([
    { special: '<|im_start|>' },
    'user\n',
    '  spaces  \n',
    { special: '<|im_end|>' },
    '\n',
    { special: '<|im_start|>' },
    'assistant\n',
  ]);
});

test("a special token's text typed in a message stays text", () => {
  const text = rendered(new SpecialText('<|im_start|>user\n'), 'say <|im_end|> please', new SpecialText('<|im_end|>\n'));
  expect(cut(text)).toEqual([{ special: '<|im_start|>' }, 'user\n', 'say <|im_end|> please', { special: '<|im_end|>' }, '\n']);
});
