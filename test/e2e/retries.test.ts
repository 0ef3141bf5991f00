/**
 * Retry policies per model version: set when the version is created, shown in its JSON, and
 * followed by the prediction workflow; each attempt's outcome is in the logs and `error` says
 * what failed, where. Faults come from the echo fixture (`fail_attempts`, `error`).
 */
import { closeDb, type Db } from '../../db/client';
import { echoFixtureVersion } from '../fixtures/echo-versions';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';

jest.setTimeout(120_000);

let db: Db;
let token: string;
let owner: string;

beforeAll(async () => {
  db = testDb();
  const a = await newAccount(db, 'retries');
  token = a.token;
  owner = a.account.username;
});
afterAll(async () => {
  await closeDb(db);
});

/** An echo-fixture version of a model of the caller's, with the given retry policy (or none). */
const version = (name: string, retry?: Record<string, number>) => echoFixtureVersion(token, owner, name, { retry });

async function predict(model: string, input: Record<string, unknown>) {
  const created = await api(`/v1/models/${owner}/${model}/predictions`, { token, body: { input } });
  expect(created.status).toBe(201);
  return poll(
    () => api(`/v1/predictions/${created.body.id}`, { token }),
    (r) => TERMINAL.includes(r.body.status),
    { timeoutMs: 60_000, intervalMs: 100 },
  ).then((r) => r.body);
}

test('a version shows its retry policy (the default when it set none); a bad one is a 422 naming the field', async () => {
  const plain = await version('retry-default');
  expect(plain.retry).toEqual({ max_attempts: 3, initial_interval_s: 1, backoff: 2 });
  const once = await version('retry-once', { max_attempts: 1 });
  expect(once.retry).toEqual({ max_attempts: 1, initial_interval_s: 1, backoff: 2 });
  const bad = await api(`/v1/models/${owner}/retry-once/versions`, {
    token,
    body: { files: [{ path: 'a', sha256: 'a'.repeat(64), size: 1 }], retry: { max_attempts: 0 } },
  });
  expect(bad.status).toBe(422);
  expect(bad.body.invalid_fields.map((f: { field: string }) => f.field)).toContain('retry.max_attempts');
});

test('max_attempts 1: a retryable fault fails the prediction at once, and the logs and error say so', async () => {
  await version('retry-none', { max_attempts: 1 });
  const done = await predict('retry-none', { text: 'x', fail_attempts: 1 });
  expect(done.status).toBe('failed');
  expect(done.logs).toMatch(
    /Attempt 1 failed on node \S+: EngineFault: echo fixture: injected fault on attempt 1 .*; no attempts left \(max_attempts 1\)/,
  );
  expect(done.logs).not.toMatch(/Attempt 2/);
  expect(done.error).toMatch(/^Attempt 1 failed on node \S+: EngineFault: echo fixture: injected fault/);
});

test('max_attempts 3: two faults, then success on the third attempt, after the policy’s waits', async () => {
  await version('retry-three', { max_attempts: 3, initial_interval_s: 0.2, backoff: 2 });
  const done = await predict('retry-three', { text: 'third time', fail_attempts: 2 });
  expect(done.status).toBe('succeeded');
  expect(done.output).toBe('third time');
  expect(done.logs).toMatch(/Attempt 1 failed on node \S+: EngineFault: .*; placing the model again in 0\.2 s/);
  expect(done.logs).toMatch(/Attempt 2 failed on node \S+: EngineFault: .*; placing the model again in 0\.4 s/);
  expect(done.error).toBeNull();
});

test('a non-retryable failure is not retried, whatever the policy', async () => {
  await version('retry-fatal', { max_attempts: 3, initial_interval_s: 0 });
  const done = await predict('retry-fatal', { text: 'x', error: 'bad input' });
  expect(done.status).toBe('failed');
  expect(done.logs).toMatch(/Attempt 1 failed on node \S+: ModelError: echo fixture: bad input; not retryable/);
  expect(done.logs).not.toMatch(/Attempt 2/);
  expect(done.error).toMatch(/ModelError: echo fixture: bad input/);
});

test('batches follow the policy too: a chunk out of attempts fails the batch, saying which chunk and why', async () => {
  await version('retry-batch', { max_attempts: 2, initial_interval_s: 0 });
  const inputs = [{ text: 'a' }, { text: 'b' }, { text: 'c', fail_attempts: 5 }, { text: 'd' }];
  const created = await api('/v1/batches', { token, body: { version: `${owner}/retry-batch`, inputs, chunk_size: 2 } });
  expect(created.status).toBe(201);
  const done = await poll(
    () => api(`/v1/batches/${created.body.id}`, { token }),
    (r) => ['succeeded', 'failed', 'canceled'].includes(r.body.status),
    {
      timeoutMs: 60_000,
      intervalMs: 100,
    },
  ).then((r) => r.body);
  expect(done.status).toBe('failed');
  expect(done.error).toMatch(/Chunk 1 \(items 2–3\) attempt 2 failed on node \S+: EngineFault: echo fixture: injected fault/);
  expect(done.logs).toMatch(/Chunk 1 .*attempt 1 failed .*; resuming from item 2 \(0 of 2 done\)/);
  expect(done.logs).toMatch(/no attempts left \(max_attempts 2\)/);
  // What finished before is not lost: chunk 0's lines are in the output.
  const res = await fetch(done.output_file.urls.get);
  expect(
    (await res.text())
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l)),
  ).toEqual([
    { index: 0, output: 'a' },
    { index: 1, output: 'b' },
  ]);
});
