/**
 * The whole path through HTTP on the real stack: API → Temporal workflow → activities →
 * llama.cpp engine worker → Postgres projection → API. infra/test.sh starts it all.
 */
import type { Client } from '@temporalio/client';
import type { Db } from '../../db/client';
import { closeDb } from '../../db/client';
import { pacedLlama } from '../fixtures/models';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { testTemporal } from '../temporal';

jest.setTimeout(120_000);

let db: Db;
let temporal: { client: Client; close: () => Promise<void> };
let token: string;
let other: string;

beforeAll(async () => {
  db = testDb();
  temporal = await testTemporal();
  token = (await newAccount(db, 'alice')).token;
  other = (await newAccount(db, 'bob')).token;
});

afterAll(async () => {
  await temporal.close();
  await closeDb(db);
});

const create = (input: Record<string, unknown>, opts: { token?: string; headers?: Record<string, string> } = {}) =>
  api('/v1/models/kiln/tiny-llama/predictions', { token: opts.token ?? token, body: { input }, headers: opts.headers });

const getPrediction = (id: string, t = token) => api(`/v1/predictions/${id}`, { token: t });

const until = (id: string, statuses: string[]) =>
  poll(
    () => getPrediction(id),
    (r) => statuses.includes(r.body.status),
    { timeoutMs: 90_000 },
  ).then((r) => r.body);

describe('creating and reading predictions', () => {
  test('create → starting → succeeded, in Replicate’s shape', async () => {
    const created = await create({ prompt: 'The kiln was', max_tokens: 16, min_tokens: 16, seed: 42 });
    expect(created.status).toBe(201);
    const p = created.body;
    expect(p.id).toMatch(/^[a-z2-7]{26}$/);
    expect(['starting', 'processing', 'succeeded']).toContain(p.status);
    expect(p.model).toBe('kiln/tiny-llama');
    expect(p.version).toMatch(/^[a-f0-9]{64}$/);
    expect(p.input).toEqual({ prompt: 'The kiln was', max_tokens: 16, min_tokens: 16, seed: 42 });
    expect(p.urls.get).toMatch(new RegExp(`/v1/predictions/${p.id}$`));
    expect(p.urls.cancel).toMatch(new RegExp(`/v1/predictions/${p.id}/cancel$`));

    const done = await until(p.id, TERMINAL);
    expect(done.status).toBe('succeeded');
    expect(done.error).toBeNull();
    expect(Array.isArray(done.output)).toBe(true);
    expect(done.output.every((c: unknown) => typeof c === 'string')).toBe(true);
    expect(done.output.join('').length).toBeGreaterThan(0);
    expect(done.metrics.output_token_count).toBe(16);
    expect(done.metrics.predict_time).toBeGreaterThan(0);
    expect(done.metrics.total_time).toBeGreaterThanOrEqual(done.metrics.predict_time);
    expect(done.logs).toContain('Using seed: 42');
    expect(done.logs).toMatch(/Generated 16 tokens/);
    for (const k of ['created_at', 'started_at', 'completed_at']) expect(Date.parse(done[k])).not.toBeNaN();
    expect(Date.parse(done.started_at)).toBeGreaterThanOrEqual(Date.parse(done.created_at));
    expect(Date.parse(done.completed_at)).toBeGreaterThanOrEqual(Date.parse(done.started_at));
  });

  test('the same seed and input give the same output through the whole stack', async () => {
    const input = { prompt: 'Clay and fire', max_tokens: 12, min_tokens: 12, seed: 7, temperature: 0.9 };
    const [a, b] = await Promise.all([create(input), create(input)]);
    const [da, dbb] = await Promise.all([until(a.body.id, TERMINAL), until(b.body.id, TERMINAL)]);
    expect(da.status).toBe('succeeded');
    expect(dbb.output).toEqual(da.output);
  });

  test('Prefer: wait answers with the finished prediction', async () => {
    const r = await create({ prompt: 'hello', max_tokens: 8 }, { headers: { prefer: 'wait=30' } });
    expect(r.status).toBe(201);
    expect(r.body.status).toBe('succeeded');
    expect(r.body.output.length).toBeGreaterThan(0);
    expect(r.body.completed_at).not.toBeNull();
  });

  test('version may be a version id, owner/name or owner/name:version', async () => {
    const first = await create({ prompt: 'x', max_tokens: 2 }, { headers: { prefer: 'wait' } });
    const versionId = first.body.version;
    for (const version of [versionId, 'kiln/tiny-llama', `kiln/tiny-llama:${versionId}`]) {
      const r = await api('/v1/predictions', {
        token,
        body: { version, input: { prompt: 'x', max_tokens: 2 } },
        headers: { prefer: 'wait' },
      });
      expect(r.status).toBe(201);
      expect(r.body.version).toBe(versionId);
      expect(r.body.status).toBe('succeeded');
    }
  });

  test('the workflow is in Temporal, searchable by Kiln’s attributes', async () => {
    const r = await create({ prompt: 'find me', max_tokens: 4 }, { headers: { prefer: 'wait' } });
    const handle = temporal.client.workflow.getHandle(`prediction-${r.body.id}`);
    // The answer leaves once the final projection is written, a moment before the workflow
    // returns.
    const description = await poll(
      () => handle.describe(),
      (d) => d.status.name !== 'RUNNING',
    );
    expect(description.type).toBe('predictionWorkflow');
    expect(description.status.name).toBe('COMPLETED');
    const attrs = description.typedSearchAttributes;
    const values = Object.fromEntries(attrs.getAll().map((p) => [p.key.name, p.value]));
    expect(values.KilnModel).toBe('kiln/tiny-llama');
    expect(values.KilnStatus).toBe('succeeded');
    expect(String(values.KilnAccount)).toMatch(/^alice-/);
    const result = await handle.result();
    expect(result.status).toBe('succeeded');
  });

  test('Idempotency-Key returns the same prediction for a retried create', async () => {
    const key = `key-${Date.now()}`;
    const a = await create({ prompt: 'once', max_tokens: 4 }, { headers: { 'idempotency-key': key } });
    const b = await create({ prompt: 'once', max_tokens: 4 }, { headers: { 'idempotency-key': key } });
    expect(b.status).toBe(201);
    expect(b.body.id).toBe(a.body.id);
    const c = await create({ prompt: 'once', max_tokens: 4 }, { token: other, headers: { 'idempotency-key': key } });
    expect(c.body.id).not.toBe(a.body.id);
  });
});

describe('cancel', () => {
  test('cancel during generation stops the engine and keeps partial output', async () => {
    // 2000 paced tokens last 40 s or more on any machine: the cancel lands mid-generation.
    await pacedLlama(db);
    const r = await api('/v1/models/kiln-test/paced-llama/predictions', {
      token,
      body: { input: { prompt: 'go on and on', max_tokens: 2000, min_tokens: 2000 } },
    });
    expect(r.status).toBe(201);
    const id = r.body.id;
    await until(id, ['processing', ...TERMINAL]);
    const canceled = await api(`/v1/predictions/${id}/cancel`, { token, method: 'POST' });
    expect(canceled.status).toBe(200);
    expect(canceled.body.id).toBe(id);
    const done = await until(id, TERMINAL);
    expect(done.status).toBe('canceled');
    // The engine stopped early: far fewer tokens than requested.
    expect(done.metrics.output_token_count).toBeLessThan(2000);
    expect(done.logs).toMatch(/Canceled after \d+ tokens/);
    expect(done.completed_at).not.toBeNull();
  });

  test('cancel of a finished prediction changes nothing', async () => {
    const r = await create({ prompt: 'short', max_tokens: 2 }, { headers: { prefer: 'wait' } });
    expect(r.body.status).toBe('succeeded');
    const c = await api(`/v1/predictions/${r.body.id}/cancel`, { token, method: 'POST' });
    expect(c.status).toBe(200);
    expect(c.body.status).toBe('succeeded');
  });
});

describe('listing', () => {
  test('newest first, only the caller’s, in cursor pages', async () => {
    const { token: mine } = await newAccount(db, 'lister');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await create({ prompt: `p${i}`, max_tokens: 2 }, { token: mine });
      ids.push(r.body.id);
    }
    const page1 = await api('/v1/predictions?page_size=2', { token: mine });
    expect(page1.status).toBe(200);
    expect(page1.body.results.map((p: { id: string }) => p.id)).toEqual([ids[2], ids[1]]);
    expect(page1.body.previous).toBeNull();
    expect(page1.body.next).toContain('cursor=');
    const next = new URL(page1.body.next);
    const page2 = await api(`${next.pathname}${next.search}`, { token: mine });
    expect(page2.body.results.map((p: { id: string }) => p.id)).toEqual([ids[0]]);
    expect(page2.body.next).toBeNull();

    const theirs = await api('/v1/predictions', { token: other });
    expect(theirs.body.results.map((p: { id: string }) => p.id)).not.toContain(ids[0]);
  });

  test('a cursor the API did not make is a 422 naming cursor', async () => {
    const r = await api('/v1/predictions?cursor=garbage', { token });
    expect(r.status).toBe(422);
    expect(r.body.detail).toMatch(/^cursor/);
  });
});

describe('errors', () => {
  test('401 without a token or with a wrong one', async () => {
    const none = await api('/v1/predictions');
    expect(none.status).toBe(401);
    expect(none.body).toMatchObject({ status: 401, detail: expect.any(String) });
    const wrong = await api('/v1/predictions', { token: 'kiln_not-a-real-token' });
    expect(wrong.status).toBe(401);
  });

  test('another account’s prediction is 404 to read and to cancel', async () => {
    const r = await create({ prompt: 'mine', max_tokens: 2 });
    expect((await getPrediction(r.body.id, other)).status).toBe(404);
    const cancel = await api(`/v1/predictions/${r.body.id}/cancel`, { token: other, method: 'POST' });
    expect(cancel.status).toBe(404);
    expect(cancel.body).toEqual(expect.objectContaining({ status: 404, detail: expect.stringContaining(r.body.id) }));
  });

  test('unknown prediction ids and routes are JSON 404s', async () => {
    const r = await getPrediction('doesnotexist');
    expect(r.status).toBe(404);
    expect(r.body.status).toBe(404);
    const route = await api('/v1/nothing-here', { token });
    expect(route.status).toBe(404);
    expect(route.body.detail).toMatch(/No route/);
    const model = await api('/v1/models/kiln/nope/predictions', { token, body: { input: { prompt: 'x' } } });
    expect(model.status).toBe(404);
  });

  test.each([
    [{ max_tokens: 5 }, 'input.prompt'],
    [{ prompt: 'x', max_tokens: 'lots' }, 'input.max_tokens'],
    [{ prompt: 'x', temperature: 99 }, 'input.temperature'],
    [{ prompt: 'x', colour: 'red' }, 'input.colour'],
  ])('422 for input %j names %s, and nothing starts', async (input, field) => {
    const before = await api('/v1/predictions', { token });
    const r = await create(input);
    expect(r.status).toBe(422);
    expect(r.body.status).toBe(422);
    expect(r.body.detail).toContain(field);
    expect(r.body.invalid_fields.map((f: { field: string }) => f.field)).toContain(field);
    const after = await api('/v1/predictions', { token });
    expect(after.body.results.length).toBe(before.body.results.length);
  });

  test('422 for an unknown version and for a bad body', async () => {
    const v = await api('/v1/predictions', { token, body: { version: 'kiln/nope', input: { prompt: 'x' } } });
    expect(v.status).toBe(422);
    expect(v.body.invalid_fields[0].field).toBe('version');
    const missing = await api('/v1/predictions', { token, body: { input: { prompt: 'x' } } });
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toMatch(/^version/);
    const notObject = await api('/v1/predictions', { token, body: { version: 'kiln/tiny-llama', input: 'hello' } });
    expect(notObject.status).toBe(422);
    expect(notObject.body.detail).toMatch(/^input/);
  });

  test('malformed JSON is a 400 with a JSON body, not a stack trace', async () => {
    const r = await api('/v1/predictions', { token, rawBody: '{"version": "kiln/tiny-llama", "input": {' });
    expect(r.status).toBe(400);
    expect(r.body).toEqual(expect.objectContaining({ status: 400, detail: expect.stringMatching(/^body: is not valid JSON/) }));
    expect(JSON.stringify(r.body)).not.toMatch(/at .*\.js|SyntaxError/);
  });
});
