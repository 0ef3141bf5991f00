/** Which bias each token is drawn with: end tokens held until min_tokens, JSON wrapped up near max_tokens. */
import type { LlamaModel, TokenBias } from 'node-llama-cpp';
import type { JsonSchema } from '../../domain/tasks/json-schema';
import { closingOf } from '../../engines/llama/grammar';
import { biasStage, tokenBiasPolicy, wrapUpFrom } from '../../engines/llama/token-bias-policy';

test('end tokens are held until min_tokens; then no bias', () => {
  expect(biasStage(0, 3, Infinity, false)).toBe('holdEnd');
  expect(biasStage(2, 3, Infinity, false)).toBe('holdEnd');
  expect(biasStage(3, 3, Infinity, false)).toBe('none');
  expect(biasStage(0, 0, Infinity, false)).toBe('none');
});

test('under a schema the wrap-up starts at its point, never before min_tokens, and only where there is a wrap-up bias', () => {
  expect(biasStage(9, 0, 10, true)).toBe('none');
  expect(biasStage(10, 0, 10, true)).toBe('wrapUp');
  expect(biasStage(10, 0, 10, false)).toBe('none');
  expect(biasStage(10, 12, 10, true)).toBe('holdEnd');
});

test("the wrap-up starts the schema's closing reserve and 8 more before max_tokens; without a schema, never", () => {
  const schema = { type: 'object', properties: { ok: { type: 'boolean' } } } as const;
  expect(wrapUpFrom(schema, 100)).toBe(100 - closingOf(schema).text.length - 8);
  expect(wrapUpFrom({ type: 'boolean' }, 100)).toBe(100 - 5 - 8);
  expect(wrapUpFrom(undefined, 100)).toBe(Infinity);
});

test("with the model's tokenizer the reserve is the closing text's tokens, not its characters", () => {
  const call = {
    type: 'object',
    properties: { name: { const: 'get_weather' }, arguments: { type: 'object', properties: { city: { type: 'string' } } } },
  } as const;
  const { text, valueChars } = closingOf(call);
  expect(JSON.parse(text.replace(/,(\s*[}\]])/g, '$1'))).toEqual({ name: 'get_weather', arguments: { city: '' } });
  expect(valueChars).toBe(0);
  const words = (t: string) => t.split(/\b/).length;
  expect(wrapUpFrom(call, 80, words)).toBe(80 - words(text) - 8);
  expect(wrapUpFrom(call, 80, words)).toBeGreaterThan(wrapUpFrom(call, 80));
});

test('values the grammar forces count a token a character, whatever the tokenizer: numbers, formats, patterns', () => {
  const order = {
    type: 'object',
    properties: {
      id: { type: 'string', format: 'uuid' },
      host: { anyOf: [{ type: 'string', format: 'ipv6' }, { type: 'null' }] },
      code: { type: 'string', pattern: '^[A-Z]{3}$' },
      quantity: { type: 'integer', minimum: 1, maximum: 9 },
      year: { type: 'integer', minimum: 10_000 },
    },
  } satisfies JsonSchema;
  const closing = closingOf(order);
  expect(closing.valueChars).toBe(36 + 39 + 25 + 4 + 5);
  expect(wrapUpFrom(order, 300, () => 1)).toBe(300 - (1 + closing.valueChars + 8));
});

/** A stand-in for node-llama-cpp's TokenBias: it records what is set. */
class FakeBias {
  readonly set_: Array<[number, unknown]> = [];
  set(token: number, bias: unknown) {
    this.set_.push([token, bias]);
    return this;
  }
}

const vocabulary = ['a', '"', '}', 'b', ']'];
const fakeModel = (tokens: { eos?: number; eot?: number }) =>
  ({
    tokens,
    tokenizer: () => [],
    // A character a token: the closing text's length.
    tokenize: (text: string) => [...text].map(() => 0),
    iterateAllTokens: () => vocabulary.keys(),
    detokenize: ([t]: number[]) => vocabulary[t],
  }) as unknown as LlamaModel;

test('the policy bans the end tokens the model has, until min_tokens', () => {
  const policy = tokenBiasPolicy(fakeModel({ eos: 7, eot: undefined }), FakeBias as unknown as typeof TokenBias, undefined, {
    max_tokens: 20,
    min_tokens: 2,
  });
  const held = policy(0) as unknown as FakeBias;
  expect(held.set_).toEqual([[7, 'never']]);
  expect(policy(1)).toBe(held);
  const free = policy(2) as unknown as FakeBias;
  expect(free).not.toBe(held);
  expect(free.set_).toEqual([]);
  expect(policy(19)).toBe(free);
});

test('under a schema the last tokens favour the tokens that close JSON', () => {
  const model = fakeModel({ eos: 1000, eot: 1001 });
  const policy = tokenBiasPolicy(model, FakeBias as unknown as typeof TokenBias, { type: 'boolean' }, { max_tokens: 20, min_tokens: 0 });
  const free = policy(0) as unknown as FakeBias;
  expect(free.set_).toEqual([]);
  expect(policy(6)).toBe(free);
  const closing = policy(7) as unknown as FakeBias;
  expect(closing.set_).toEqual([
    [1, { logit: 10 }],
    [2, { logit: 10 }],
    [4, { logit: 10 }],
  ]);
  expect(policy(19)).toBe(closing);
});
