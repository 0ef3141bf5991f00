/**
 * The trained chat model in the box (infra/trained-models.json): seeded with its license, it
 * answers known questions through the APIs a user meets first, and a chat stops at the model's
 * own end of turn (its GGUF's chat template, rendered as llama.cpp renders it).
 */
import OpenAI from 'openai';
import { closeDb, type Db } from '../../db/client';
import { API_URL, api, newAccount, testDb } from '../helpers';

jest.setTimeout(180_000);

const MODEL = 'kiln/smollm2-135m-instruct';
const SYSTEM = { role: 'system' as const, content: 'You are a helpful assistant. Answer in one short sentence.' };

let db: Db;
let token: string;
let openai: OpenAI;
beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'trained')).token;
  openai = new OpenAI({ apiKey: token, baseURL: `${API_URL}/openai/v1`, maxRetries: 0 });
});
afterAll(async () => closeDb(db));

test('the trained model is listed with its license and its pinned weights', async () => {
  const r = await api(`/v1/models/${MODEL}`, { token });
  expect(r.status).toBe(200);
  expect(r.body).toMatchObject({
    license: 'Apache-2.0',
    license_url: 'https://www.apache.org/licenses/LICENSE-2.0',
    task: 'text-generation',
  });
  expect(r.body.latest_version.files).toEqual([
    { path: 'model.gguf', sha256: 'b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53', size: 98362432 },
  ]);
  const bg = await api('/v1/models/kiln/remove-background', { token });
  expect(bg.body.license).toBe('AGPL-3.0');
});

test.each([
  ['What is the capital of France?', /Paris/],
  ['Name three primary colors.', /red.*blue|blue.*red/i],
])('chat: %s', async (question, answer) => {
  const chat = await openai.chat.completions.create({
    model: MODEL,
    temperature: 0,
    max_tokens: 48,
    messages: [SYSTEM, { role: 'user', content: question }],
  });
  const choice = chat.choices[0];
  expect(choice.message.content).toMatch(answer);
  // The model ended its turn itself: <|im_end|> is an end-of-generation token, not text.
  expect(choice.finish_reason).toBe('stop');
  expect(choice.message.content).not.toContain('<|im_end|>');
});

test('a chat without a system message gets the template’s own default system prompt, as llama.cpp renders it', async () => {
  const withDefault = await api(`/v1/models/${MODEL}/predictions`, {
    token,
    method: 'POST',
    headers: { Prefer: 'wait' },
    body: { input: { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1, temperature: 0 } },
  });
  const withOwn = await api(`/v1/models/${MODEL}/predictions`, {
    token,
    method: 'POST',
    headers: { Prefer: 'wait' },
    body: {
      input: {
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Hi' },
        ],
        max_tokens: 1,
        temperature: 0,
      },
    },
  });
  expect(withDefault.body.status).toBe('succeeded');
  expect(withOwn.body.status).toBe('succeeded');
  // "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n" against "…Be brief.<|im_end|>\n".
  expect(withDefault.body.metrics.input_token_count - withOwn.body.metrics.input_token_count).toBeGreaterThanOrEqual(10);
});
