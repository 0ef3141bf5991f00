/** The official `openai` npm client, pointed at Kiln's /openai/v1, works unchanged. */
import OpenAI from 'openai';
import { closeDb, type Db } from '../../db/client';
import { API_URL, api, newAccount, testDb } from '../helpers';
import { specCheckedFetch } from '../spec-checked-fetch';

jest.setTimeout(120_000);

let db: Db;
let token: string;
let openai: OpenAI;
// Every response the client sees is checked against the API reference (/openapi.json's contracts).
const spec = specCheckedFetch();
beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'openai')).token;
  openai = new OpenAI({ apiKey: token, baseURL: `${API_URL}/openai/v1`, maxRetries: 0, fetch: spec.fetch });
});
afterEach(() => expect(spec.problems.splice(0)).toEqual([]));
afterAll(async () => {
  // The checks ran on the calls above, not on none.
  expect(spec.seen.length).toBeGreaterThan(5);
  await closeDb(db);
});

test('models lists the language and embedding models', async () => {
  const ids: string[] = [];
  for await (const m of openai.models.list()) ids.push(m.id);
  expect(ids).toEqual(expect.arrayContaining(['kiln/tiny-llama', 'kiln/tiny-embed']));
});

test('chat completion without streaming, with usage, and it is a prediction', async () => {
  const { data, response } = await openai.chat.completions
    .create({
      model: 'kiln/tiny-llama',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Say something about kilns.' },
      ],
      max_tokens: 12,
      temperature: 0.5,
      seed: 4,
    })
    .withResponse();
  expect(data.object).toBe('chat.completion');
  expect(data.choices).toHaveLength(1);
  expect(data.choices[0].message.role).toBe('assistant');
  expect(typeof data.choices[0].message.content).toBe('string');
  expect(['stop', 'length']).toContain(data.choices[0].finish_reason);
  expect(data.usage!.prompt_tokens).toBeGreaterThan(5);
  expect(data.usage!.completion_tokens).toBeGreaterThan(0);
  expect(data.usage!.total_tokens).toBe(data.usage!.prompt_tokens + data.usage!.completion_tokens);
  const predictionId = response.headers.get('x-kiln-prediction-id')!;
  const p = await api(`/v1/predictions/${predictionId}`, { token });
  expect(p.body.status).toBe('succeeded');
  expect(p.body.output.join('')).toBe(data.choices[0].message.content);
  expect(p.body.input.messages[1]).toEqual({ role: 'user', content: 'Say something about kilns.' });
});

test('chat completion streamed: chunks add up to the prediction’s output, then [DONE]', async () => {
  const stream = await openai.chat.completions.create({
    model: 'kiln/tiny-llama',
    messages: [{ role: 'user', content: 'Stream please.' }],
    max_tokens: 30,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish: string | null = null;
  let usage: OpenAI.CompletionUsage | undefined;
  let role: string | undefined;
  let id = '';
  for await (const chunk of stream) {
    id = chunk.id;
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    role ??= choice.delta.role;
    text += choice.delta.content ?? '';
    finish = choice.finish_reason ?? finish;
  }
  expect(role).toBe('assistant');
  // The random model may end on its own before 30 tokens: the finish reason must say which.
  expect(usage!.completion_tokens).toBeGreaterThan(0);
  expect(usage!.completion_tokens).toBeLessThanOrEqual(30);
  expect(finish).toBe(usage!.completion_tokens === 30 ? 'length' : 'stop');
  const p = await api(`/v1/predictions/${id.replace(/^chatcmpl-/, '')}`, { token });
  expect(text).toBe(p.body.output.join(''));
});

test('legacy completions', async () => {
  const c = await openai.completions.create({ model: 'kiln/tiny-llama', prompt: 'The kiln', max_tokens: 5, seed: 1 });
  expect(c.object).toBe('text_completion');
  expect(c.choices[0].text.length).toBeGreaterThan(0);
  expect(c.usage!.completion_tokens).toBeLessThanOrEqual(5);
});

test('embeddings: one vector per input, deterministic, as floats or base64', async () => {
  const e = await openai.embeddings.create({ model: 'kiln/tiny-embed', input: ['clay', 'fire', 'clay'] });
  expect(e.data).toHaveLength(3);
  expect(e.data.map((d) => d.index)).toEqual([0, 1, 2]);
  const [a, b, c] = e.data.map((d) => d.embedding);
  expect(a.length).toBe(256);
  // Unit vectors, as OpenAI's are (the engine normalises what llama.cpp pools).
  expect(Math.hypot(...a)).toBeCloseTo(1, 5);
  expect(c).toEqual(a);
  expect(b).not.toEqual(a);
  expect(e.usage.prompt_tokens).toBeGreaterThan(0);
  const floats = await openai.embeddings.create({ model: 'kiln/tiny-embed', input: 'clay', encoding_format: 'float' });
  expect(floats.data[0].embedding.length).toBe(256);
  floats.data[0].embedding.forEach((v, i) => expect(v).toBeCloseTo(a[i], 5));
});

test('errors come in OpenAI’s shape', async () => {
  await expect(openai.chat.completions.create({ model: 'kiln/nope', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({
    status: 404,
    code: 'model_not_found',
  });
  await expect(openai.embeddings.create({ model: 'kiln/tiny-llama', input: 'x' })).rejects.toMatchObject({ status: 400 });
  await expect(openai.chat.completions.create({ model: 'kiln/tiny-llama', messages: [] })).rejects.toMatchObject({
    status: 400,
    type: 'invalid_request_error',
  });
  const bad = new OpenAI({ apiKey: 'kiln_wrong', baseURL: `${API_URL}/openai/v1`, maxRetries: 0, fetch: spec.fetch });
  await expect(bad.models.list()).rejects.toMatchObject({ status: 401 });
});
