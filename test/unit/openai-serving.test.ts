/** OpenAI requests as Kiln task inputs, and a prediction's result as OpenAI's response bodies. */
import { BadRequestError } from '../../api/errors';
import {
  chatBody,
  chatCompletionBody,
  completionBody,
  embeddingListBody,
  openAiModelListBody,
  type Tool,
  textCompletionBody,
} from '../../api/openai/protocol';
import { chatCompletion, chatPlan } from '../../api/openai/serving-chat';
import { completionPlan, textCompletion } from '../../api/openai/serving-completions';
import { base64Vector, embeddingList, embeddingsInput } from '../../api/openai/serving-embeddings';
import { modelList } from '../../api/openai/serving-models';

const version = (settings: Record<string, unknown> = {}) => ({ version: { settings } }) as never;
const started = { id: 'p1', createdAt: new Date(1_700_000_000_500) };
const weather: Tool = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } };
const ask = [{ role: 'user', content: 'hi' }];

describe('chat', () => {
  test('max_completion_tokens wins over max_tokens, and 512 is the default', () => {
    expect(
      chatPlan(chatBody.parse({ model: 'a/b', messages: ask, max_tokens: 9, max_completion_tokens: 7 }), version()).input.max_tokens,
    ).toBe(7);
    expect(chatPlan(chatBody.parse({ model: 'a/b', messages: ask, max_tokens: 9 }), version()).input.max_tokens).toBe(9);
    expect(chatPlan(chatBody.parse({ model: 'a/b', messages: ask }), version()).limit).toEqual({ maxTokens: 512, contextSize: undefined });
  });

  test("the input has OpenAI's sampling defaults, and only the optional fields that were sent", () => {
    const { input } = chatPlan(
      chatBody.parse({
        model: 'a/b',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'h' },
              { type: 'text', text: 'i' },
            ],
          },
        ],
      }),
      version(),
    );
    expect(input).toEqual({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 512, temperature: 1, top_p: 1 });
    const full = chatPlan(
      chatBody.parse({
        model: 'a/b',
        messages: ask,
        temperature: 0,
        top_p: 0.5,
        stop: 'x',
        seed: 0,
        min_tokens: 2,
        response_format: { type: 'json_object' },
      }),
      version(),
    );
    expect(full.input).toEqual({
      messages: ask,
      json_schema: { type: 'object' },
      max_tokens: 512,
      temperature: 0,
      top_p: 0.5,
      stop: 'x',
      seed: 0,
      min_tokens: 2,
    });
  });

  test('a text answer: the content, finish_reason from the limit, usage', () => {
    const plan = chatPlan(chatBody.parse({ model: 'a/b', messages: ask, max_tokens: 4 }), version());
    const body = chatCompletion(plan, started, { output: ['Hi', ' there'], metrics: { input_token_count: 2, output_token_count: 4 } });
    expect(chatCompletionBody.parse(body)).toEqual(body);
    expect(body).toMatchObject({ id: 'chatcmpl-p1', object: 'chat.completion', created: 1_700_000_000, model: 'a/b' });
    expect(body.choices).toEqual([
      { index: 0, message: { role: 'assistant', content: 'Hi there', refusal: null }, finish_reason: 'length', logprobs: null },
    ]);
    expect(body.usage.total_tokens).toBe(6);
  });

  test('an answer that is a call of a known tool comes back as tool_calls, with no content', () => {
    const plan = chatPlan(chatBody.parse({ model: 'a/b', messages: ask, tools: [weather] }), version());
    const body = chatCompletion(plan, started, { output: [' {"name":"get_weather",', '"arguments":{"city":"Oslo"}} '], metrics: {} });
    expect(body.choices[0].finish_reason).toBe('tool_calls');
    expect(body.choices[0].message).toEqual({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'call_p1_0', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }],
      refusal: null,
    });
  });

  test('a call cut off by max_tokens ends by length, with neither the unfinished JSON as content nor a call', () => {
    for (const tool_choice of ['required', 'auto'] as const) {
      const plan = chatPlan(chatBody.parse({ model: 'a/b', messages: ask, tools: [weather], tool_choice, max_tokens: 4 }), version());
      const body = chatCompletion(plan, started, { output: ['{"name":"get'], metrics: { output_token_count: 4 } });
      expect(body.choices[0]).toMatchObject({ message: { role: 'assistant', content: null }, finish_reason: 'length' });
      expect(body.choices[0].message.tool_calls).toBeUndefined();
    }
    // Plain text an auto answer began with is text, cut or not.
    const plan = chatPlan(chatBody.parse({ model: 'a/b', messages: ask, tools: [weather], max_tokens: 4 }), version());
    const body = chatCompletion(plan, started, { output: ['It is sunny in'], metrics: { output_token_count: 4 } });
    expect(body.choices[0]).toMatchObject({ message: { content: 'It is sunny in' }, finish_reason: 'length' });
  });

  test('with tool_choice none, JSON of a tool call is only text', () => {
    const plan = chatPlan(chatBody.parse({ model: 'a/b', messages: ask, tools: [weather], tool_choice: 'none' }), version());
    const body = chatCompletion(plan, started, { output: ['{"name":"get_weather","arguments":{}}'], metrics: { output_token_count: 1 } });
    expect(body.choices[0]).toMatchObject({ message: { content: '{"name":"get_weather","arguments":{}}' }, finish_reason: 'stop' });
  });
});

describe('completions', () => {
  test("16 tokens by default (OpenAI's), the prompt as given, a one-string list as that string", () => {
    const plan = completionPlan(completionBody.parse({ model: 'a/b', prompt: ['Once'] }), version({ contextSize: 64 }));
    expect(plan.input).toEqual({ prompt: 'Once', max_tokens: 16, temperature: 1, top_p: 1 });
    expect(plan.limit).toEqual({ maxTokens: 16, contextSize: 64 });
  });

  test('the whole answer is a text_completion with usage', () => {
    const plan = completionPlan(completionBody.parse({ model: 'a/b', prompt: 'Once', max_tokens: 5 }), version());
    const body = textCompletion(plan, started, { output: ['upon', ' a'], metrics: { input_token_count: 1, output_token_count: 2 } });
    expect(textCompletionBody.parse(body)).toEqual(body);
    expect(body).toEqual({
      id: 'cmpl-p1',
      object: 'text_completion',
      created: 1_700_000_000,
      model: 'a/b',
      choices: [{ index: 0, text: 'upon a', finish_reason: 'stop', logprobs: null }],
      usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3, prompt_tokens_details: { cached_tokens: 0 } },
    });
  });
});

describe('embeddings', () => {
  const done = {
    output: [
      [0.5, -1, 2.25],
      [1, 2, 3],
    ],
    metrics: { input_token_count: 4 },
  };

  test('the input texts are the task input as they are', () => {
    expect(embeddingsInput({ model: 'a/e', input: ['x', 'y'] })).toEqual({ text: ['x', 'y'] });
  });

  test('floats by default; the prompt tokens are the total', () => {
    const body = embeddingList({ model: 'a/e', input: ['x', 'y'] }, done);
    expect(embeddingListBody.parse(body)).toEqual(body);
    expect(body.data).toEqual([
      { object: 'embedding', index: 0, embedding: [0.5, -1, 2.25] },
      { object: 'embedding', index: 1, embedding: [1, 2, 3] },
    ]);
    expect(body.usage).toEqual({ prompt_tokens: 4, total_tokens: 4 });
  });

  test('base64 is little-endian float32s', () => {
    const body = embeddingList({ model: 'a/e', input: 'x', encoding_format: 'base64' }, done);
    const bytes = Buffer.from(body.data[0].embedding as string, 'base64');
    expect(bytes).toHaveLength(12);
    expect([bytes.readFloatLE(0), bytes.readFloatLE(4), bytes.readFloatLE(8)]).toEqual([0.5, -1, 2.25]);
    expect(base64Vector([1])).toBe('AACAPw==');
  });

  test("dimensions must be the model's", () => {
    expect(embeddingList({ model: 'a/e', input: 'x', dimensions: 3 }, done).data).toHaveLength(2);
    expect(() => embeddingList({ model: 'a/e', input: 'x', dimensions: 2 }, done)).toThrow(BadRequestError);
    expect(() => embeddingList({ model: 'a/e', input: 'x', dimensions: 2 }, done)).toThrow('This model makes 3-dimensional vectors');
  });
});

test('the model list leaves out models without a version, and names each owner/name', () => {
  const createdAt = new Date(1_600_000_000_900);
  const body = modelList([
    { owner: 'kiln', name: 'llama', createdAt, latestVersionId: 'v1' },
    { owner: 'kiln', name: 'empty', createdAt, latestVersionId: null },
  ]);
  expect(openAiModelListBody.parse(body)).toEqual(body);
  expect(body).toEqual({ object: 'list', data: [{ id: 'kiln/llama', object: 'model', created: 1_600_000_000, owned_by: 'kiln' }] });
});
