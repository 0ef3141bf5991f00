/**
 * OpenAI's strict structured-output keywords (issue 31, item 3) through the OpenAI API on the
 * trained chat model and on kiln/tiny-llama's random weights: ranges, patterns, formats and
 * multipleOf are accepted and the grammar holds the answer to them; a tool call comes back as a
 * call; one cut off by max_tokens ends with finish_reason "length" and no grammar JSON as content.
 */
import OpenAI from 'openai';
import { z } from 'zod';
import { closeDb, type Db } from '../../db/client';
import { API_URL, newAccount, testDb } from '../helpers';

jest.setTimeout(240_000);

const TRAINED = 'kiln/smollm2-135m-instruct';

let db: Db;
let token: string;
let openai: OpenAI;
beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'strict')).token;
  openai = new OpenAI({ apiKey: token, baseURL: `${API_URL}/openai/v1`, maxRetries: 0 });
});
afterAll(() => closeDb(db));

const trip = {
  type: 'object',
  properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 } },
  required: ['city', 'days'],
  additionalProperties: false,
};
const tripZod = z.strictObject({ city: z.string(), days: z.number().int().min(1) });

const weather = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'The current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
    strict: true,
  },
};

test('"I fly to Lisbon for 3 days" with a {city, days >= 1} schema answers JSON valid against it', async () => {
  const r = await openai.chat.completions.create({
    model: TRAINED,
    temperature: 0,
    max_tokens: 60,
    messages: [
      { role: 'system', content: 'Extract the trip as JSON.' },
      { role: 'user', content: 'I fly to Lisbon for 3 days' },
    ],
    response_format: { type: 'json_schema', json_schema: { name: 'trip', schema: trip, strict: true } },
  });
  const content = r.choices[0].message.content!;
  console.log(`trained model, trip: ${content}`);
  expect(r.choices[0].finish_reason).toBe('stop');
  expect(tripZod.safeParse(JSON.parse(content)).error?.issues).toBeUndefined();
  // The known answer, as issue 31 asks of a trained model at temperature 0.
  expect(JSON.parse(content)).toEqual({ city: 'Lisbon', days: 3 });
});

test.each(['weather in Paris?', "What's the weather like in Paris today?"])(
  '"%s" with a get_weather tool answers a call with {"city": …}',
  async (question) => {
    const r = await openai.chat.completions.create({
      model: TRAINED,
      temperature: 0,
      // A budget as tight as a client may set: the call takes 37 tokens, and the wrap-up bias
      // (engines/llama/token-bias-policy.ts), which closes strings at once, starts only the
      // closing text's tokens, in the model's own tokenizer, before it.
      max_tokens: 64,
      messages: [{ role: 'user', content: question }],
      tools: [weather],
      tool_choice: 'required',
    });
    const choice = r.choices[0];
    const call = choice.message.tool_calls?.[0] as { function: { name: string; arguments: string } } | undefined;
    console.log(`trained model, ${question}: ${JSON.stringify(call?.function)}`);
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    expect(call?.function.name).toBe('get_weather');
    expect(z.strictObject({ city: z.string() }).safeParse(JSON.parse(call!.function.arguments)).error?.issues).toBeUndefined();
    expect(JSON.parse(call!.function.arguments)).toEqual({ city: 'Paris' });
  },
);

describe('a tool call cut off by max_tokens', () => {
  const request = {
    model: TRAINED,
    temperature: 0,
    max_tokens: 4,
    messages: [{ role: 'user' as const, content: 'weather in Paris?' }],
    tools: [weather],
    tool_choice: 'required' as const,
  };

  test('ends with finish_reason "length", no tool_calls and no grammar JSON as content', async () => {
    const r = await openai.chat.completions.create(request);
    const choice = r.choices[0];
    expect(choice.finish_reason).toBe('length');
    expect(choice.message.tool_calls ?? []).toEqual([]);
    expect(choice.message.content).toBeNull();
    expect(r.usage!.completion_tokens).toBe(4);
  });

  test('streamed: the same, with no content delta', async () => {
    const stream = await openai.chat.completions.create({ ...request, stream: true });
    let text = '';
    let finish: string | null = null;
    let calls = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      calls += chunk.choices[0]?.delta?.tool_calls?.length ?? 0;
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect({ text, calls, finish }).toEqual({ text: '', calls: 0, finish: 'length' });
  });
});

describe("OpenAI's strict keywords are enforced by the grammar, whatever the weights", () => {
  const order = {
    type: 'object',
    properties: {
      code: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{2,4}$' },
      quantity: { type: 'integer', minimum: 1, maximum: 9 },
      price: { type: 'number', exclusiveMinimum: 0, maximum: 100, multipleOf: 0.01 },
      step: { type: 'integer', minimum: 0, maximum: 50, multipleOf: 5 },
      id: { type: 'string', format: 'uuid' },
      on: { type: 'string', format: 'date' },
      host: { anyOf: [{ $ref: '#/$defs/ip' }, { type: 'null' }] },
    },
    required: ['code', 'quantity', 'price', 'step', 'id', 'on', 'host'],
    additionalProperties: false,
    $defs: { ip: { type: 'string', format: 'ipv4' } },
  };
  const decimals = (n: number) => (String(n).split('.')[1] ?? '').length;
  const orderZod = z.strictObject({
    code: z.string().regex(/^[A-Z]{3}-[0-9]{2,4}$/),
    quantity: z.number().int().min(1).max(9),
    price: z
      .number()
      .gt(0)
      .max(100)
      .refine((n) => decimals(n) <= 2),
    step: z
      .number()
      .int()
      .min(0)
      .max(50)
      .refine((n) => n % 5 === 0),
    id: z.uuid(),
    on: z.iso.date(),
    host: z.ipv4().nullable(),
  });

  test.each([
    ['kiln/tiny-llama', 1],
    ['kiln/tiny-llama', 2],
    ['kiln/tiny-llama', 3],
    [TRAINED, 1],
  ])('%s, seed %i: the answer validates', async (model, seed) => {
    const r = await openai.chat.completions.create({
      model,
      seed,
      max_tokens: 300,
      messages: [{ role: 'user', content: 'An order, as JSON.' }],
      response_format: { type: 'json_schema', json_schema: { name: 'order', schema: order, strict: true } },
    });
    const content = r.choices[0].message.content!;
    console.log(`${model} seed ${seed}, order: ${content}`);
    expect(orderZod.safeParse(JSON.parse(content)).error?.issues).toBeUndefined();
  });
});
