/** Decoding on a lent sequence: a chat through LlamaChat, a completion through LlamaCompletion topped up to min_tokens. */
import type { ChatWrapper, ChatWrapperGeneratedContextState, LlamaContextSequence, Token } from 'node-llama-cpp';
import type { GenerationPrompt } from '../../engines/llama/generation-prompt';
import type { SamplingOptions } from '../../engines/llama/sampling-options';
import { type Decoding, decode } from '../../engines/llama/sequence-decoding';

const sequence = {} as LlamaContextSequence;
const options = { maxTokens: 8, topP: 0.9 } as unknown as SamplingOptions;

/** node-llama-cpp stand-ins that record what they were asked, and add tokens to the stream as scripted. */
function fakes(stream: { outputTokens: number; text: string }, script: Array<{ adds: string; stopReason: string }>) {
  const log: unknown[] = [];
  const answer = (input: unknown, opts: unknown) => {
    log.push(['generate', input, opts]);
    const step = script.shift() ?? { adds: '', stopReason: 'maxTokens' };
    stream.outputTokens += step.adds.length;
    stream.text += step.adds;
    return { metadata: { stopReason: step.stopReason } };
  };
  class LlamaChat {
    constructor(o: unknown) {
      log.push(['chat', o]);
    }
    generateResponse = async (history: unknown, opts: unknown) => answer(history, opts);
    dispose(o: unknown) {
      log.push(['dispose chat', o]);
    }
  }
  class LlamaCompletion {
    constructor(o: unknown) {
      log.push(['completion', o]);
    }
    generateCompletionWithMeta = async (text: unknown, opts: unknown) => answer(text, opts);
    dispose(o: unknown) {
      log.push(['dispose completion', o]);
    }
  }
  return { log, nlc: { LlamaChat, LlamaCompletion } as unknown as Decoding['nlc'] };
}

function decoding(
  prompt: GenerationPrompt,
  stream: { outputTokens: number; text: string },
  nlc: Decoding['nlc'],
  more: Partial<Decoding> = {},
) {
  const disposals: Array<() => void> = [];
  const d: Decoding = {
    nlc,
    sequence,
    contextSize: 100,
    prompt,
    continues: '',
    continuedTokens: 0,
    limits: { max_tokens: 8, min_tokens: 0 },
    options,
    stream,
    signal: new AbortController().signal,
    onDispose: (dispose) => disposals.push(dispose),
    ...more,
  };
  return { d, disposals };
}

const tokens = (n: number) => Array.from({ length: n }, (_, i) => i as Token);

test('a completion evaluates its prompt and the continued text, with a context shift that keeps the prompt whole', async () => {
  const stream = { outputTokens: 2, text: 'ab' };
  const { log, nlc } = fakes(stream, [{ adds: 'cde', stopReason: 'maxTokens' }]);
  const { d, disposals } = decoding({ kind: 'completion', text: 'Once', tokens: tokens(95) }, stream, nlc, {
    continues: 'ab',
    continuedTokens: 2,
  });
  expect(await decode(d)).toBe('maxTokens');
  expect(log).toEqual([
    ['completion', { contextSequence: sequence }],
    ['generate', 'Onceab', { ...options, contextShiftSize: 3 }],
  ]);
  expect(disposals).toHaveLength(1);
  disposals[0]();
  expect(log.at(-1)).toEqual(['dispose completion', { disposeSequence: false }]);
});

test('a completion that ends short of min_tokens goes on from the text so far', async () => {
  const stream = { outputTokens: 0, text: '' };
  const { log, nlc } = fakes(stream, [
    { adds: 'ab', stopReason: 'eogToken' },
    { adds: 'cdef', stopReason: 'maxTokens' },
  ]);
  const { d } = decoding({ kind: 'completion', text: 'P', tokens: tokens(10) }, stream, nlc, { limits: { max_tokens: 8, min_tokens: 5 } });
  expect(await decode(d)).toBe('maxTokens');
  expect(log.slice(1)).toEqual([
    ['generate', 'P', { ...options, contextShiftSize: 10 }],
    ['generate', 'Pab', { ...options, contextShiftSize: 10, maxTokens: 6 }],
  ]);
});

test('a chat answers its history, or the history with the continued response begun; it is never topped up', async () => {
  const stream = { outputTokens: 0, text: '' };
  const { log, nlc } = fakes(stream, [{ adds: 'a', stopReason: 'eogToken' }]);
  const history = [
    { type: 'user' as const, text: 'hi' },
    { type: 'model' as const, response: [] },
  ];
  const wrapper = {} as ChatWrapper;
  const state = {} as ChatWrapperGeneratedContextState;
  const chat: GenerationPrompt = { kind: 'chat', messages: [{ role: 'user', content: 'hi' }], history, wrapper, state, tokens: tokens(4) };
  const { d, disposals } = decoding(chat, stream, nlc, { limits: { max_tokens: 8, min_tokens: 5 } });
  expect(await decode(d)).toBe('eogToken');
  expect(log).toEqual([
    ['chat', { contextSequence: sequence, chatWrapper: wrapper }],
    ['generate', history, options],
  ]);
  disposals[0]();
  expect(log.at(-1)).toEqual(['dispose chat', { disposeSequence: false }]);

  const again = fakes({ outputTokens: 0, text: '' }, []);
  await decode(decoding(chat, stream, again.nlc, { continues: 'He' }).d);
  expect(again.log[1]).toEqual(['generate', [history[0], { type: 'model', response: ['He'] }], options]);
});
