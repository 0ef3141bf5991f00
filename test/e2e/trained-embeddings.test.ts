/**
 * The trained embedding model in the box (infra/trained-models.json): all-MiniLM-L6-v2, converted
 * to GGUF at install from the pinned PyPI wheel, is seeded with its license and gives 384-dimensional
 * unit vectors through OpenAI's client whose similarities follow meaning; a text longer than its
 * context is the caller's error in each API's own shape.
 */
import OpenAI from 'openai';
import { closeDb, type Db } from '../../db/client';
import { trainedModels } from '../../infra/trained-models';
import { cosineSimilarity } from '../../lib/vectors';
import { API_URL, api, newAccount, testDb } from '../helpers';
import { specCheckedFetch } from '../spec-checked-fetch';

jest.setTimeout(180_000);

const MODEL = 'kiln/minilm';
const pinned = trainedModels().find((m) => m.name === 'minilm')!;
// Far more than the model's 512-token context.
const TOO_LONG = 'the kiln fires the clay '.repeat(200);

let db: Db;
let token: string;
let openai: OpenAI;
const spec = specCheckedFetch();
beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'embeddings')).token;
  openai = new OpenAI({ apiKey: token, baseURL: `${API_URL}/openai/v1`, maxRetries: 0, fetch: spec.fetch });
});
afterEach(() => expect(spec.problems.splice(0)).toEqual([]));
afterAll(async () => closeDb(db));

test('the trained embedding model is listed with its license and its pinned, converted weights', async () => {
  const r = await api(`/v1/models/${MODEL}`, { token });
  expect(r.status).toBe(200);
  expect(r.body).toMatchObject({ license: 'Apache-2.0', license_url: 'https://www.apache.org/licenses/LICENSE-2.0', task: 'embeddings' });
  expect(r.body.latest_version.files).toEqual([{ path: 'model.gguf', sha256: pinned.sha256, size: pinned.size }]);
  const ids: string[] = [];
  for await (const m of openai.models.list()) ids.push(m.id);
  expect(ids).toContain(MODEL);
});

test('OpenAI’s client gets 384-dimensional unit vectors, and a same-topic pair scores well above a different-topic pair', async () => {
  const input = ['How do I reset my password?', 'I forgot my password and cannot log in.', 'The stock market fell sharply today.'];
  const e = await openai.embeddings.create({ model: MODEL, input });
  expect(e.data.map((d) => d.index)).toEqual([0, 1, 2]);
  const [reset, forgot, stocks] = e.data.map((d) => d.embedding);
  for (const v of [reset, forgot, stocks]) {
    expect(v).toHaveLength(384);
    expect(Math.hypot(...v)).toBeCloseTo(1, 5);
  }
  expect(e.usage.prompt_tokens).toBeGreaterThan(10);
  const same = cosineSimilarity(reset, forgot);
  const different = cosineSimilarity(reset, stocks);
  // all-MiniLM-L6-v2 in sentence-transformers: ~0.7 and ~0.0 (bench/embedding-quality.ts has the full set).
  expect(same).toBeGreaterThan(0.5);
  expect(different).toBeLessThan(0.2);
  expect(same - different).toBeGreaterThan(0.4);
});

test('the same vectors come through Replicate’s API as through OpenAI’s', async () => {
  const text = 'A man is playing a guitar.';
  const r = await api(`/v1/models/${MODEL}/predictions`, { token, body: { input: { text: [text] } }, headers: { Prefer: 'wait' } });
  expect(r.body.status).toBe('succeeded');
  const [vector] = r.body.output as number[][];
  const floats = await openai.embeddings.create({ model: MODEL, input: text, encoding_format: 'float' });
  expect(cosineSimilarity(vector, floats.data[0].embedding)).toBeCloseTo(1, 6);
});

test('a text longer than the model’s context is the caller’s error: 400 on OpenAI’s API, 422 on Replicate’s', async () => {
  await expect(openai.embeddings.create({ model: MODEL, input: ['short', TOO_LONG] })).rejects.toMatchObject({
    status: 400,
    code: 'context_length_exceeded',
    param: 'input',
  });
  const r = await api(`/v1/models/${MODEL}/predictions`, { token, body: { input: { text: TOO_LONG } }, headers: { Prefer: 'wait' } });
  expect(r.status).toBe(422);
  expect(r.body.invalid_fields).toEqual([
    expect.objectContaining({
      field: 'input.text',
      description: expect.stringMatching(/tokens, more than the model's context of 512 tokens/),
    }),
  ]);
});
