/** Cancel-After: canceled when the deadline passes mid-run, aborted when it passes before the start. */
import { closeDb, type Db } from '../../db/client';
import { neverStartingModel, pacedLlama } from '../fixtures/models';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';

jest.setTimeout(120_000);

let db: Db;
let token: string;
let owner: { id: string; username: string };
beforeAll(async () => {
  db = testDb();
  const a = await newAccount(db, 'deadline');
  token = a.token;
  owner = a.account;
});
afterAll(() => closeDb(db));

const finished = (id: string) =>
  poll(
    () => api(`/v1/predictions/${id}`, { token }),
    (r) => TERMINAL.includes(r.body.status),
    { timeoutMs: 60_000 },
  ).then((r) => r.body);

test('a deadline that passes while generating cancels, keeping the partial output', async () => {
  await pacedLlama(db);
  // Warm first: the deadline is to pass while generating, not while loading.
  const warm = await api('/v1/models/kiln-test/paced-llama/predictions', { token, body: { input: { prompt: 'w', max_tokens: 1 } } });
  expect((await finished(warm.body.id)).status).toBe('succeeded');
  const r = await api('/v1/models/kiln-test/paced-llama/predictions', {
    token,
    // 1000 paced tokens last 20 s or more on any machine: well past the 5 s deadline.
    body: { input: { prompt: 'keep going', max_tokens: 1000, min_tokens: 1000, seed: 1 } },
    headers: { 'cancel-after': '5s' },
  });
  expect(r.status).toBe(201);
  const done = await finished(r.body.id);
  expect(done.status).toBe('canceled');
  expect(done.logs).toMatch(/deadline .* passed/);
  expect(done.metrics.output_token_count).toBeGreaterThan(0);
  expect(done.metrics.output_token_count).toBeLessThan(1000);
  expect(Date.parse(done.completed_at) - Date.parse(done.created_at)).toBeGreaterThanOrEqual(5000);
});

test('a prediction that never started before its deadline is aborted', async () => {
  const remove = await neverStartingModel(db, owner, 'too-big');
  try {
    const r = await api(`/v1/models/${owner.username}/too-big/predictions`, {
      token,
      body: { input: { prompt: 'never' } },
      headers: { 'cancel-after': '5' },
    });
    expect(r.status).toBe(201);
    const done = await finished(r.body.id);
    expect(done.status).toBe('aborted');
    expect(done.started_at).toBeNull();
    expect(done.output).toBeNull();
    expect(done.logs).toMatch(/Aborted: the deadline .* passed before the prediction started/);
  } finally {
    await remove();
  }
});

test('Cancel-After must be a sane duration', async () => {
  const r = await api('/v1/models/kiln/tiny-llama/predictions', {
    token,
    body: { input: { prompt: 'x' } },
    headers: { 'cancel-after': '1s' },
  });
  expect(r.status).toBe(422);
  expect(r.body.detail).toMatch(/^Cancel-After/);
});
