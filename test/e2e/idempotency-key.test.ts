/** Every route that creates a prediction checks `Idempotency-Key` alike: 1 to 255 characters. */
import { closeDb, type Db } from '../../db/client';
import { api, newAccount, testDb } from '../helpers';

jest.setTimeout(60_000);

let db: Db;
let token: string;
let deployment: string;
beforeAll(async () => {
  db = testDb();
  const me = await newAccount(db, 'idem');
  token = me.token;
  const model = await api('/v1/models/kiln/tiny-llama', { token });
  const created = await api('/v1/deployments', {
    token,
    body: { name: 'idem', model: 'kiln/tiny-llama', version: model.body.latest_version.id, min_instances: 0, max_instances: 1 },
  });
  expect(created.status).toBe(201);
  deployment = `/v1/deployments/${me.account.username}/idem/predictions`;
});
afterAll(() => closeDb(db));

const tooLong = 'k'.repeat(256);
const body = { input: { prompt: 'idem', max_tokens: 2 } };

test.each([
  ['/v1/predictions', () => ({ ...body, version: 'kiln/tiny-llama' })],
  ['/v1/models/kiln/tiny-llama/predictions', () => body],
  ['a deployment', () => body],
])('%s: a key over 255 characters is a 400 naming the header, and starts nothing', async (route, bodyOf) => {
  const path = route === 'a deployment' ? deployment : route;
  const r = await api(path, { token, body: bodyOf(), headers: { 'idempotency-key': tooLong } });
  expect(r.status).toBe(400);
  expect(r.body.detail).toBe('Idempotency-Key must be 1 to 255 characters');
  expect((await api('/v1/predictions', { token })).body.results).toEqual([]);
});

test('a deployment prediction retried with the same key is the same prediction', async () => {
  const key = `idem-${'k'.repeat(250)}`;
  const first = await api(deployment, { token, body, headers: { 'idempotency-key': key } });
  expect(first.status).toBe(201);
  const again = await api(deployment, { token, body, headers: { 'idempotency-key': key } });
  expect(again.status).toBe(201);
  expect(again.body.id).toBe(first.body.id);
});

test('OpenAI routes check the key too', async () => {
  const r = await api('/openai/v1/chat/completions', {
    token,
    body: { model: 'kiln/tiny-llama', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 },
    headers: { 'idempotency-key': tooLong },
  });
  expect(r.status).toBe(400);
  expect(JSON.stringify(r.body)).toContain('Idempotency-Key must be 1 to 255 characters');
});
