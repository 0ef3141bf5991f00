/**
 * Structured output, tool calls, clean UTF-8 and context limits through the HTTP APIs, on
 * kiln/tiny-llama's random weights: a grammar makes even them answer valid JSON.
 */
import OpenAI from 'openai';
import { z } from 'zod';
import { closeDb, type Db } from '../../db/client';
import { API_URL, api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { readSse } from '../sse';

jest.setTimeout(180_000);

let db: Db;
let token: string;
let openai: OpenAI;
beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'structured')).token;
  openai = new OpenAI({ apiKey: token, baseURL: `${API_URL}/openai/v1`, maxRetries: 0 });
});
afterAll(() => closeDb(db));

const person = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    age: { type: 'integer' },
    pet: { enum: ['cat', 'dog', 'none'] },
    tags: { type: 'array', items: { type: 'string', maxLength: 10 }, maxItems: 3 },
  },
  required: ['name', 'age', 'pet', 'tags'],
  additionalProperties: false,
};
const personZod = z.strictObject({
  name: z.string(),
  age: z.number().int(),
  pet: z.enum(['cat', 'dog', 'none']),
  tags: z.array(z.string().max(10)).max(3),
});

const weather = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { enum: ['C', 'F'] } }, required: ['city', 'unit'] },
  },
};
const time = {
  type: 'function' as const,
  function: {
    name: 'get_time',
    description: 'The time in a zone',
    parameters: { type: 'object', properties: { zone: { type: 'string' } } },
  },
};
const weatherArgs = z.strictObject({ city: z.string(), unit: z.enum(['C', 'F']) });

/** ~5,000 tokens with this vocabulary: more than kiln/tiny-llama's context of 4,096. */
const tooLong = Array.from({ length: 1000 }, (_, i) => ['kiln', 'clay', 'glaze', 'fire'][i % 4]).join(' ');

describe('response_format', () => {
  test('json_schema: the answer validates against the schema, and the prediction carries it as json_schema', async () => {
    for (const seed of [1, 2]) {
      const { data, response } = await openai.chat.completions
        .create({
          model: 'kiln/tiny-llama',
          messages: [{ role: 'user', content: 'A person, as JSON.' }],
          response_format: { type: 'json_schema', json_schema: { name: 'person', schema: person, strict: true } },
          max_tokens: 120,
          seed,
        })
        .withResponse();
      const content = data.choices[0].message.content!;
      expect(personZod.safeParse(JSON.parse(content)).error?.issues).toBeUndefined();
      const p = await api(`/v1/predictions/${response.headers.get('x-kiln-prediction-id')}`, { token });
      expect(p.body.input.json_schema).toEqual(person);
    }
  });

  test('json_object: the answer is a JSON object', async () => {
    const r = await openai.chat.completions.create({
      model: 'kiln/tiny-llama',
      messages: [{ role: 'user', content: 'Anything, as JSON.' }],
      response_format: { type: 'json_object' },
      max_tokens: 60,
      seed: 3,
    });
    const value = JSON.parse(r.choices[0].message.content!);
    expect(value).toEqual(expect.any(Object));
    expect(Array.isArray(value)).toBe(false);
  });

  test('a schema the grammar cannot enforce is refused, naming the keyword', async () => {
    // A number range with no whole number in it: the grammar writes numbers as a whole part and a fraction.
    const schema = { type: 'object', properties: { age: { type: 'number', minimum: 0.1, maximum: 0.9 } } };
    await expect(
      openai.chat.completions.create({
        model: 'kiln/tiny-llama',
        messages: [{ role: 'user', content: 'x' }],
        response_format: { type: 'json_schema', json_schema: { name: 'p', schema } },
      }),
    ).rejects.toMatchObject({
      status: 400,
      type: 'invalid_request_error',
      param: 'response_format.json_schema.schema.properties.age.minimum',
    });
    const bad = await api('/openai/v1/chat/completions', {
      token,
      body: {
        model: 'kiln/tiny-llama',
        messages: [{ role: 'user', content: 'x' }],
        response_format: { type: 'json_schema', json_schema: { name: 'p', schema: { type: 'strin' } } },
      },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe('response_format.json_schema.schema.type');
  });

  test('the Replicate API takes json_schema as an input, and refuses a bad one with a 422 naming the field', async () => {
    const r = await api('/v1/models/kiln/tiny-llama/predictions', {
      token,
      headers: { prefer: 'wait=60' },
      body: { input: { prompt: 'A person:', json_schema: person, max_tokens: 120, seed: 4 } },
    });
    expect(r.status).toBe(201);
    expect(r.body.status).toBe('succeeded');
    expect(personZod.safeParse(JSON.parse(r.body.output.join(''))).error?.issues).toBeUndefined();
    const bad = await api('/v1/models/kiln/tiny-llama/predictions', {
      token,
      // A lookahead has no grammar.
      body: { input: { prompt: 'x', json_schema: { type: 'object', properties: { id: { type: 'string', pattern: '^(?=a)' } } } } },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.invalid_fields[0].field).toBe('input.json_schema.properties.id.pattern');
  });
});

describe('tools', () => {
  test('tool_choice required: a call of one of the tools, with arguments that follow its schema', async () => {
    const r = await openai.chat.completions.create({
      model: 'kiln/tiny-llama',
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [weather, time],
      tool_choice: 'required',
      max_tokens: 100,
      seed: 1,
    });
    const choice = r.choices[0];
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toHaveLength(1);
    const call = choice.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.type).toBe('function');
    expect(call.id).toMatch(/^call_/);
    expect(['get_weather', 'get_time']).toContain(call.function.name);
    expect(JSON.parse(call.function.arguments)).toEqual(expect.any(Object));
  });

  test('a named function is the one called; its result goes back as a tool message and the model answers', async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
    const r = await openai.chat.completions.create({
      model: 'kiln/tiny-llama',
      messages,
      tools: [weather, time],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 100,
      seed: 2,
    });
    const call = r.choices[0].message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).toBe('get_weather');
    expect(weatherArgs.safeParse(JSON.parse(call.function.arguments)).error?.issues).toBeUndefined();
    messages.push(r.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21}' });
    const { data, response } = await openai.chat.completions
      .create({ model: 'kiln/tiny-llama', messages, tools: [weather, time], tool_choice: 'none', max_tokens: 8, seed: 2 })
      .withResponse();
    expect(data.choices[0].message.tool_calls ?? []).toEqual([]);
    expect(typeof data.choices[0].message.content).toBe('string');
    const p = await api(`/v1/predictions/${response.headers.get('x-kiln-prediction-id')}`, { token });
    expect(p.body.input.messages.map((m: { content: string }) => m.content).join('\n')).toContain('{"temperature": 21}');
  });

  test('streamed: the call arrives as a tool_calls delta, then finish_reason tool_calls', async () => {
    const stream = await openai.chat.completions.create({
      model: 'kiln/tiny-llama',
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [weather],
      tool_choice: 'required',
      max_tokens: 100,
      seed: 3,
      stream: true,
    });
    let args = '';
    let name = '';
    let finish: string | null = null;
    let content = '';
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (!choice) continue;
      content += choice.delta.content ?? '';
      for (const t of choice.delta.tool_calls ?? []) {
        name += t.function?.name ?? '';
        args += t.function?.arguments ?? '';
      }
      finish = choice.finish_reason ?? finish;
    }
    expect(content).toBe('');
    expect(name).toBe('get_weather');
    expect(weatherArgs.safeParse(JSON.parse(args)).error?.issues).toBeUndefined();
    expect(finish).toBe('tool_calls');
  });

  test('parallel_tool_calls: true lets a forced answer hold several calls', async () => {
    const r = await openai.chat.completions.create({
      model: 'kiln/tiny-llama',
      messages: [{ role: 'user', content: 'Weather and time?' }],
      tools: [weather, time],
      tool_choice: 'required',
      parallel_tool_calls: true,
      max_tokens: 200,
      seed: 5,
    });
    expect(r.choices[0].finish_reason).toBe('tool_calls');
    expect(r.choices[0].message.tool_calls!.length).toBeGreaterThanOrEqual(1);
  });

  test('a named function that is not among the tools is refused, naming tool_choice.function.name', async () => {
    await expect(
      openai.chat.completions.create({
        model: 'kiln/tiny-llama',
        messages: [{ role: 'user', content: 'x' }],
        tools: [weather],
        tool_choice: { type: 'function', function: { name: 'get_time' } },
      }),
    ).rejects.toMatchObject({ status: 400, param: 'tool_choice.function.name' });
  });
});

describe('clean UTF-8', () => {
  const text = 'café ☕ garden ünd 日本';

  test('a character split across byte tokens arrives whole in the SSE stream, the OpenAI stream and the output', async () => {
    const created = await api('/v1/models/kiln/tiny-llama/predictions', {
      token,
      body: { input: { prompt: 'Say it:', json_schema: { const: text }, max_tokens: 60, seed: 1 }, stream: true },
    });
    expect(created.status).toBe(201);
    const sse = await readSse(created.body.urls.stream, {
      headers: { authorization: `Bearer ${token}` },
      until: (e) => e.event === 'done',
    });
    const streamed = sse.events.filter((e) => e.event === 'output').map((e) => e.data);
    expect(streamed.join('')).toBe(JSON.stringify(text));
    const done = await api(`/v1/predictions/${created.body.id}`, { token });
    expect(done.body.output.join('')).toBe(JSON.stringify(text));

    const stream = await openai.chat.completions.create({
      model: 'kiln/tiny-llama',
      messages: [{ role: 'user', content: 'Say it' }],
      response_format: { type: 'json_schema', json_schema: { name: 'say', schema: { const: text } } },
      max_tokens: 60,
      stream: true,
    });
    let content = '';
    for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? '';
    expect(content).toBe(JSON.stringify(text));
  });

  test('free text has no U+FFFD, though random weights draw lone byte tokens', async () => {
    const r = await openai.completions.create({ model: 'kiln/tiny-llama', prompt: 'Once', max_tokens: 300, temperature: 1.5, seed: 2 });
    expect(r.choices[0].text).not.toContain('\uFFFD');
  });
});

describe('context limits', () => {
  test('a prompt longer than the context: OpenAI’s 400 context_length_exceeded at once, one attempt, also when streamed', async () => {
    const started = Date.now();
    const err = await openai.chat.completions
      .create({
        model: 'kiln/tiny-llama',
        messages: [
          { role: 'system', content: tooLong },
          { role: 'user', content: 'hi' },
        ],
        max_tokens: 8,
      })
      .withResponse()
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 400, code: 'context_length_exceeded', param: 'messages', type: 'invalid_request_error' });
    expect(Date.now() - started).toBeLessThan(30_000);
    const id = (err as { headers: Headers }).headers.get('x-kiln-prediction-id');
    const p = await api(`/v1/predictions/${id}`, { token });
    expect(p.body.status).toBe('failed');
    expect(p.body.logs).toMatch(/Attempt 1 failed .*ContextLengthExceeded.*not retryable/);
    expect(p.body.logs).not.toMatch(/Attempt 2/);

    await expect(
      openai.chat.completions.create({
        model: 'kiln/tiny-llama',
        messages: [{ role: 'user', content: tooLong }],
        max_tokens: 8,
        stream: true,
      }),
    ).rejects.toMatchObject({ status: 400, code: 'context_length_exceeded' });
    await expect(openai.completions.create({ model: 'kiln/tiny-llama', prompt: tooLong, max_tokens: 8 })).rejects.toMatchObject({
      status: 400,
      code: 'context_length_exceeded',
      param: 'prompt',
    });
  });

  test('on the Replicate API: a 422 naming input.prompt when waiting; the prediction fails naming it otherwise', async () => {
    const waited = await api('/v1/models/kiln/tiny-llama/predictions', {
      token,
      headers: { prefer: 'wait=60' },
      body: { input: { prompt: tooLong } },
    });
    expect(waited.status).toBe(422);
    expect(waited.body.invalid_fields[0].field).toBe('input.prompt');
    const created = await api('/v1/models/kiln/tiny-llama/predictions', { token, body: { input: { prompt: tooLong } } });
    expect(created.status).toBe(201);
    const done = await poll(
      () => api(`/v1/predictions/${created.body.id}`, { token }),
      (r) => TERMINAL.includes(r.body.status),
    );
    expect(done.body.status).toBe('failed');
    expect(done.body.error).toMatch(/ContextLengthExceeded: input\.prompt: the prompt is \d+ tokens/);
  });

  test('a long system prompt that fits is answered with what room is left, not failed after three attempts', async () => {
    const system = tooLong.split(' ').slice(0, 700).join(' ');
    const r = await openai.chat.completions.create({
      model: 'kiln/tiny-llama',
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: 'hi' },
      ],
      max_tokens: 512,
      seed: 1,
    });
    // 512 tokens do not fit after this prompt: the answer gets what room is left instead of failing.
    expect(r.usage!.prompt_tokens).toBeGreaterThan(4096 - 512);
    const total = r.usage!.prompt_tokens + r.usage!.completion_tokens;
    expect(total).toBeLessThanOrEqual(4096);
    // Cut at the end of the context, or ended by the model before it (its text depends on the
    // engine's threads): the finish reason says which.
    expect(r.choices[0].finish_reason).toBe(total === 4096 ? 'length' : 'stop');
  });
});
