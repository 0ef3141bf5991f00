/** What a finished prediction says in OpenAI's terms: usage, finish_reason, the response head. */
import { finishReason, limitOf, outputText, responseHead, unixSeconds, usage } from '../../api/openai/result';

const metrics = (input?: number, output?: number, cached?: number) => ({
  metrics: {
    ...(input !== undefined ? { input_token_count: input } : {}),
    ...(output !== undefined ? { output_token_count: output } : {}),
    ...(cached !== undefined ? { cached_tokens: cached } : {}),
  },
});

test('usage adds prompt and completion tokens and reports the cached prompt tokens', () => {
  expect(usage(metrics(12, 5, 8))).toEqual({
    prompt_tokens: 12,
    completion_tokens: 5,
    total_tokens: 17,
    prompt_tokens_details: { cached_tokens: 8 },
  });
});

test('usage of a prediction without token counts is zeros, never undefined or NaN', () => {
  expect(usage(metrics())).toEqual({
    prompt_tokens: 0,
    completion_tokens: 0,
    total_tokens: 0,
    prompt_tokens_details: { cached_tokens: 0 },
  });
});

test('finish_reason is length once the output reaches max_tokens, stop below it', () => {
  expect(finishReason(metrics(3, 16), { maxTokens: 16 })).toBe('length');
  expect(finishReason(metrics(3, 15), { maxTokens: 16 })).toBe('stop');
});

test('finish_reason is length when prompt and output fill the context, even under max_tokens', () => {
  expect(finishReason(metrics(120, 8), { maxTokens: 512, contextSize: 128 })).toBe('length');
  expect(finishReason(metrics(119, 8), { maxTokens: 512, contextSize: 128 })).toBe('stop');
  expect(finishReason(metrics(120, 8), { maxTokens: 512 })).toBe('stop');
});

test('the limit takes the context size from the version settings only when it is a number', () => {
  expect(limitOf({ version: { settings: { contextSize: 2048 } } }, 16)).toEqual({ maxTokens: 16, contextSize: 2048 });
  expect(limitOf({ version: { settings: { contextSize: '2048' } } }, 16)).toEqual({ maxTokens: 16, contextSize: undefined });
  expect(limitOf({ version: { settings: {} } }, 7)).toEqual({ maxTokens: 7, contextSize: undefined });
});

test('the output text joins the pieces of a text-generation output; anything else is empty', () => {
  expect(outputText({ output: ['Hel', 'lo', '!'] })).toBe('Hello!');
  expect(outputText({ output: null })).toBe('');
  expect(outputText({ output: 'not a list' })).toBe('');
});

test('the head names the prediction and counts whole seconds', () => {
  const createdAt = new Date(1_700_000_123_999);
  expect(unixSeconds(createdAt)).toBe(1_700_000_123);
  expect(responseHead('chatcmpl', { id: 'abc', createdAt }, 'kiln/m')).toEqual({
    id: 'chatcmpl-abc',
    created: 1_700_000_123,
    model: 'kiln/m',
  });
});
