/**
 * Issue 37, findings 1–3, through HTTP on every route that takes a JSON schema: a schema nested
 * past the bound, one with a reserved property name, and one with a repetition llama.cpp's grammar
 * parser refuses are each the client's mistake, answered at once with a 4xx naming the field and
 * the bound (Replicate's 422, OpenAI's 400 in its own shape), never a 500 or a prediction that
 * fails on the engine after retries.
 */
import OpenAI from 'openai';
import { closeDb, type Db } from '../../db/client';
import { MAX_SCHEMA_DEPTH } from '../../domain/tasks/schema-bounds';
import { API_URL, api, newAccount, testDb } from '../helpers';

jest.setTimeout(120_000);

let db: Db;
let token: string;
let openai: OpenAI;
beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'schemabounds')).token;
  openai = new OpenAI({ apiKey: token, baseURL: `${API_URL}/openai/v1`, maxRetries: 0 });
});
afterAll(() => closeDb(db));

/** `{"items":{"items":…{"type":"string"}}}`, `depth` levels of items. */
function nested(depth: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < depth; i++) schema = { items: schema };
  return schema;
}

/** JSON.parse keeps `__proto__` as an own property, as a client's JSON body carries it. */
const protoRequired = JSON.parse(
  '{"type":"object","properties":{"__proto__":{"type":"boolean"},"a":{"type":"boolean"}},"required":["__proto__","a"],"additionalProperties":false}',
);
const constructorProperty = { type: 'object', properties: { constructor: { type: 'string' } }, required: ['constructor'] };
const longString = { type: 'string', maxLength: 2000 };

/** Each schema, what a refusal of it must say, and the field under json_schema it names. */
const cases: Array<[string, Record<string, unknown>, RegExp, string]> = [
  ['nested 400 levels deep', nested(400), new RegExp(`nested deeper than ${MAX_SCHEMA_DEPTH} levels`), ''],
  ['nested 3000 levels deep', nested(3000), new RegExp(`nested deeper than ${MAX_SCHEMA_DEPTH} levels`), ''],
  ['with a required __proto__ property', protoRequired, /"__proto__" is reserved/, ''],
  ['with a constructor property', constructorProperty, /"constructor" is reserved/, ''],
  ['with a maxLength the grammar cannot repeat', longString, /at most 1000/, '.maxLength'],
];

/** The answer must name the schema's field, and say why. */
function expectRefused(res: { status: number; body: any }, field: string, why: RegExp): void {
  expect(res.status).toBe(422);
  expect(res.body.invalid_fields[0].field.startsWith(field)).toBe(true);
  expect(res.body.detail).toMatch(why);
}

describe.each(cases)('a json_schema %s', (_what, schema, why, below) => {
  test('is a 422 naming input.json_schema on /v1/models/…/predictions and /v1/predictions', async () => {
    const input = { prompt: 'x', json_schema: schema, max_tokens: 4 };
    const byModel = await api('/v1/models/kiln/tiny-llama/predictions', { token, body: { input } });
    expectRefused(byModel, `input.json_schema${below}`, why);
    const byVersion = await api('/v1/predictions', { token, body: { version: 'kiln/tiny-llama', input }, headers: { Prefer: 'wait' } });
    expectRefused(byVersion, `input.json_schema${below}`, why);
  });

  test('is a 422 naming inputs[0].json_schema on /v1/batches', async () => {
    const res = await api('/v1/batches', { token, body: { version: 'kiln/tiny-llama', inputs: [{ prompt: 'x', json_schema: schema }] } });
    expectRefused(res, `inputs[0].json_schema${below}`, why);
  });

  test("is OpenAI's 400 naming response_format, or the tool's parameters", async () => {
    const asFormat = openai.chat.completions.create({
      model: 'kiln/tiny-llama',
      messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema } },
      max_tokens: 4,
    });
    await expect(asFormat).rejects.toMatchObject({
      status: 400,
      type: 'invalid_request_error',
      param: expect.stringMatching(new RegExp(`^response_format\\.json_schema\\.schema${below.replace('.', '\\.')}`)),
      message: expect.stringMatching(why),
    });
    const asTool = openai.chat.completions.create({
      model: 'kiln/tiny-llama',
      messages: [{ role: 'user', content: 'x' }],
      tools: [{ type: 'function', function: { name: 'f', parameters: schema } }],
      max_tokens: 4,
    });
    await expect(asTool).rejects.toMatchObject({
      status: 400,
      type: 'invalid_request_error',
      param: expect.stringMatching(/^tools\.0\.function\.parameters/),
      message: expect.stringMatching(why),
    });
  });
});

test('a schema nested deeper than a client can write with JSON.stringify is refused all the same', async () => {
  const depth = 100_000;
  const schema = `${'{"items":'.repeat(depth)}{"type":"string"}${'}'.repeat(depth)}`;
  const byModel = await api('/v1/models/kiln/tiny-llama/predictions', {
    token,
    rawBody: `{"input":{"prompt":"x","json_schema":${schema}}}`,
  });
  expectRefused(byModel, 'input.json_schema', /nested deeper/);
  const chat = await api('/openai/v1/chat/completions', {
    token,
    rawBody: `{"model":"kiln/tiny-llama","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":${schema}}}}`,
  });
  expect(chat.status).toBe(400);
  expect(chat.body.error).toMatchObject({ type: 'invalid_request_error', param: 'response_format.json_schema.schema' });
});

test("a deployment's predictions refuse such a schema with a 422 too", async () => {
  const model = await api('/v1/models/kiln/tiny-llama', { token });
  const name = `bounds-${Date.now().toString(36)}`;
  const created = await api('/v1/deployments', {
    token,
    body: { name, model: 'kiln/tiny-llama', version: model.body.latest_version.id, min_instances: 0, max_instances: 1 },
  });
  expect(created.status).toBe(201);
  const { owner } = created.body;
  for (const [, schema, why, below] of cases) {
    const res = await api(`/v1/deployments/${owner}/${name}/predictions`, { token, body: { input: { prompt: 'x', json_schema: schema } } });
    expectRefused(res, `input.json_schema${below}`, why);
  }
});

test('the largest repetition the bound allows builds a grammar and runs to a valid answer', async () => {
  const schema = { type: 'array', items: { type: 'string', maxLength: 1000 }, minItems: 1, maxItems: 1000 };
  const res = await api('/v1/models/kiln/tiny-llama/predictions', {
    token,
    body: { input: { prompt: 'A list.', json_schema: schema, max_tokens: 24, seed: 3 } },
    headers: { Prefer: 'wait=60' },
  });
  expect(res.status).toBe(201);
  expect(res.body.status).toBe('succeeded');
  // Cut off by max_tokens or complete, it began as the grammar allows.
  expect(res.body.output.join('')).toMatch(/^\[\s*"/);
});
