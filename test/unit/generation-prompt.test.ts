/** A request's prompt: a chat rendered by the model's template, or a completion's text, and their tokens. */
import type { ChatWrapper, LlamaModel, Token } from 'node-llama-cpp';
import { chatToAnswer, generationPrompt, reuseProbe } from '../../engines/llama/generation-prompt';

/** One token per character; the beginning token 1 where the model wants one. */
const model = {
  tokenizer: (text: string, _special?: boolean, options?: string) =>
    [...(options === 'trimLeadingSpace' ? text.trimStart() : text)].map((c) => c.charCodeAt(0) as Token),
  tokens: { bos: 1 as Token, shouldPrependBosToken: true },
} as unknown as LlamaModel;

/** A template that renders each item's text on a line. */
const wrapper = {
  generateContextState: ({ chatHistory }: { chatHistory: Array<{ text?: string; response?: string[] }> }) => ({
    contextText: {
      tokenize: (tokenizer: (t: string) => Token[]) => tokenizer(chatHistory.map((i) => i.text ?? i.response?.join('') ?? '').join('\n')),
    },
  }),
} as unknown as ChatWrapper;

test("a completion's prompt is its text; the probe is what LlamaCompletion evaluates", () => {
  const prompt = generationPrompt(model, { prompt: ' hi', messages: undefined }, () => wrapper);
  expect(prompt).toEqual({ kind: 'completion', text: ' hi', tokens: [32, 104, 105] });
  expect(reuseProbe(model, prompt)).toEqual([1, 104, 105]);
});

test("a chat is rendered by the model's chat wrapper; its rendered tokens are the probe", () => {
  const resolved: LlamaModel[] = [];
  const messages = [{ role: 'user' as const, content: 'hi' }];
  const prompt = generationPrompt(model, { prompt: undefined, messages }, (m) => (resolved.push(m), wrapper));
  expect(resolved).toEqual([model]);
  expect(prompt).toMatchObject({ kind: 'chat', messages, tokens: [104, 105, 10] });
  expect(reuseProbe(model, prompt)).toBe(prompt.tokens);
});

test('a chat that continues an earlier response answers with that response begun', () => {
  const prompt = generationPrompt(model, { messages: [{ role: 'user', content: 'hi' }] }, () => wrapper);
  if (prompt.kind !== 'chat') throw new Error('a chat');
  expect(chatToAnswer(prompt, '')).toBe(prompt.history);
  expect(chatToAnswer(prompt, 'Hel').at(-1)).toEqual({ type: 'model', response: ['Hel'] });
});
