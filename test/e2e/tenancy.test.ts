/**
 * Multi-tenancy through HTTP: tokens, rate limits counted in Postgres (two API processes share
 * them), admission caps, sharing of private models, usage, and fair queuing under a flood.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { Client, Connection } from '@temporalio/client';
import { temporal as temporalProto } from '@temporalio/proto';
import { updateAccount } from '../../db/accounts';
import { closeDb, type Db } from '../../db/client';
import { addVersion, shareModel, upsertModel } from '../../db/models';
import { predictionWorkflowId } from '../../domain/contracts';
import { startApi } from '../chaos';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { freePort } from '../receiver';
import { testDataConverter } from '../temporal';

jest.setTimeout(180_000);

let db: Db;
beforeAll(() => {
  db = testDb();
});
afterAll(() => closeDb(db));

const echo = (token: string, input: Record<string, unknown>, headers: Record<string, string> = {}) =>
  api('/v1/models/kiln/echo-fixture/predictions', { token, body: { input }, headers });
const get = (token: string, id: string) => api(`/v1/predictions/${id}`, { token });
const finished = (token: string, id: string) =>
  poll(
    () => get(token, id),
    (r) => TERMINAL.includes(r.body.status),
    { timeoutMs: 120_000 },
  ).then((r) => r.body);

describe('account and tokens', () => {
  test('GET /v1/account says who and what the limits are', async () => {
    const { token, account } = await newAccount(db, 'acct');
    const r = await api('/v1/account', { token });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ type: 'user', username: account.username, limits: { max_running: 64, over_cap: 'wait' } });
    expect(r.body.limits.rate_limits_per_minute['text-generation']).toBe(300);
  });

  test('a token is shown once, listed without its secret, and dead once revoked', async () => {
    const { token } = await newAccount(db, 'tok');
    const created = await api('/v1/account/tokens', { token, body: { name: 'ci' } });
    expect(created.status).toBe(201);
    const second: string = created.body.token;
    expect(second).toMatch(/^kiln_/);
    expect((await api('/v1/account', { token: second })).status).toBe(200);
    const list = await api('/v1/account/tokens', { token });
    expect(list.body.results.map((t: { name: string }) => t.name)).toContain('ci');
    expect(JSON.stringify(list.body)).not.toContain(second);
    const revoked = await api(`/v1/account/tokens/${created.body.id}`, { token, method: 'DELETE' });
    expect(revoked.status).toBe(200);
    expect((await api('/v1/account', { token: second })).status).toBe(401);
    expect((await api('/v1/account', { token })).status).toBe(200);
  });
});

describe('rate limits', () => {
  let second: ChildProcess;
  let secondUrl: string;

  beforeAll(async () => {
    // A second API process of its own (node, its own pool and Temporal client): the limit must
    // hold across both.
    const port = await freePort();
    second = await startApi(port);
    secondUrl = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    const exited = once(second, 'exit');
    second.kill('SIGTERM');
    await exited;
  });

  test('over the per-task limit: 429 with Retry-After, X-RateLimit-* and a detail, across API processes', async () => {
    const viaSecond = (token: string, input: Record<string, unknown>) =>
      fetch(`${secondUrl}/v1/models/kiln/echo-fixture/predictions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ input }),
      });
    // The limit counts in fixed one-minute windows: three creates that a minute's turn split
    // (their X-RateLimit-Reset differs) are made again, by a fresh account, once.
    const threeCreates = async () => {
      const { token, account } = await newAccount(db, 'rl');
      await updateAccount(db, account.id, { rateLimits: { 'echo-fixture': 3 } });
      const a = await echo(token, { text: 'a' });
      const b = await viaSecond(token, { text: 'b' });
      const c = await echo(token, { text: 'c' });
      return { token, a, b, c };
    };
    let first = await threeCreates();
    if (first.a.headers.get('x-ratelimit-reset') !== first.c.headers.get('x-ratelimit-reset')) first = await threeCreates();
    const { token, a, b, c } = first;
    expect([a.status, b.status, c.status]).toEqual([201, 201, 201]);
    expect(a.headers.get('x-ratelimit-limit')).toBe('3');
    expect(c.headers.get('x-ratelimit-remaining')).toBe('0');
    let limited = await viaSecond(token, { text: 'd' });
    if (limited.status !== 429) {
      // Only a minute's turn lets a fourth create through: it opened a new window, whose fourth is refused in turn.
      expect(limited.headers.get('x-ratelimit-reset')).not.toBe(c.headers.get('x-ratelimit-reset'));
      for (const text of ['e', 'f', 'g']) limited = await viaSecond(token, { text });
    }
    expect(limited.status).toBe(429);
    const body = await limited.json();
    expect(body).toMatchObject({ status: 429, detail: expect.stringContaining('3 echo-fixture predictions per minute') });
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(Number(limited.headers.get('x-ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000);
    // Another task type has its own limit.
    expect((await api('/v1/models/kiln/tiny-llama/predictions', { token, body: { input: { prompt: 'x', max_tokens: 1 } } })).status).toBe(
      201,
    );
  });
});

describe('admission caps', () => {
  test('over max_running, predictions wait their turn (default)', async () => {
    const { token, account } = await newAccount(db, 'capwait');
    await updateAccount(db, account.id, { maxRunning: 1 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await echo(token, { text: `${i}`, sleep_ms: 700 })).body.id);
    const done = await Promise.all(ids.map((id) => finished(token, id)));
    expect(done.map((p) => p.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    // One at a time: each started only after the previous one had completed.
    const spans = done
      .map((p) => ({ started: Date.parse(p.started_at), completed: Date.parse(p.completed_at) }))
      .sort((x, y) => x.started - y.started);
    for (let i = 1; i < spans.length; i++) expect(spans[i].started).toBeGreaterThanOrEqual(spans[i - 1].completed);
  });

  test('over max_running, an account that refuses gets 429 at once', async () => {
    const { token, account } = await newAccount(db, 'caprefuse');
    await updateAccount(db, account.id, { maxRunning: 1, overCap: 'refuse' });
    const first = await echo(token, { sleep_ms: 3000 });
    expect(first.status).toBe(201);
    await poll(
      () => api('/v1/account', { token }),
      (r) => r.body.current.admitted === 1,
    );
    const second = await echo(token, { sleep_ms: 10 });
    expect(second.status).toBe(429);
    expect(second.body.detail).toMatch(/max_running 1/);
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThan(0);
    await finished(token, first.body.id);
    expect((await echo(token, { sleep_ms: 10 })).status).toBe(201);
  });

  test('over max_queued: 429, nothing is started', async () => {
    const { token, account } = await newAccount(db, 'capqueue');
    await updateAccount(db, account.id, { maxRunning: 1, maxQueued: 1 });
    const running = (await echo(token, { sleep_ms: 4000 })).body.id;
    await poll(
      () => get(token, running),
      (r) => r.body.status === 'processing',
    );
    const queued = await echo(token, { sleep_ms: 10 });
    expect(queued.status).toBe(201);
    const refused = await echo(token, { sleep_ms: 10 });
    expect(refused.status).toBe(429);
    expect(refused.body.detail).toMatch(/max_queued 1/);
    const list = await api('/v1/predictions', { token });
    expect(list.body.results).toHaveLength(2);
  });
});

describe('private models and allowed_accounts', () => {
  test('a private model is invisible to others until shared with them', async () => {
    const owner = await newAccount(db, 'owner');
    const friend = await newAccount(db, 'friend');
    const model = await upsertModel(db, {
      ownerId: owner.account.id,
      owner: owner.account.username,
      name: 'secret-echo',
      task: 'echo-fixture',
      visibility: 'private',
    });
    await addVersion(db, model, { task: 'echo-fixture', engine: 'echo-fixture', files: [], memoryBytes: 1, settings: { sequences: 8 } });
    const route = `/v1/models/${owner.account.username}/secret-echo/predictions`;
    expect((await api(route, { token: owner.token, body: { input: { text: 'mine' } } })).status).toBe(201);
    expect((await api(route, { token: friend.token, body: { input: { text: 'x' } } })).status).toBe(404);
    const byName = await api('/v1/predictions', {
      token: friend.token,
      body: { version: `${owner.account.username}/secret-echo`, input: { text: 'x' } },
    });
    expect(byName.status).toBe(422);
    await shareModel(db, model.id, [friend.account.id]);
    const shared = await api(route, { token: friend.token, body: { input: { text: 'now ok' } }, headers: { prefer: 'wait' } });
    expect(shared.status).toBe(201);
    expect(shared.body.output).toBe('now ok');
    const stranger = await newAccount(db, 'stranger');
    expect((await api(route, { token: stranger.token, body: { input: { text: 'x' } } })).status).toBe(404);
  });
});

describe('usage', () => {
  test('every prediction is metered, summed by day and model', async () => {
    const { token } = await newAccount(db, 'usage');
    const a = await api('/v1/models/kiln/tiny-llama/predictions', {
      token,
      body: { input: { prompt: 'meter me', max_tokens: 7, min_tokens: 7 } },
      headers: { prefer: 'wait' },
    });
    const b = await api('/v1/models/kiln/tiny-llama/predictions', {
      token,
      body: { input: { prompt: 'and me', max_tokens: 5, min_tokens: 5 } },
      headers: { prefer: 'wait' },
    });
    await echo(token, { text: 'x' }, { prefer: 'wait' });
    const usage = await poll(
      () => api('/v1/account/usage', { token }),
      (r) => r.body.results.reduce((n: number, x: { predictions: number }) => n + x.predictions, 0) === 3,
    );
    const llama = usage.body.results.find((r: { model: string }) => r.model === 'kiln/tiny-llama');
    expect(llama).toMatchObject({ day: new Date().toISOString().slice(0, 10), predictions: 2, output_tokens: 12, hardware: 'cpu' });
    expect(llama.input_tokens).toBe(a.body.metrics.input_token_count + b.body.metrics.input_token_count);
    expect(llama.predict_time).toBeCloseTo(a.body.metrics.predict_time + b.body.metrics.predict_time, 2);
    expect(usage.body.results.find((r: { model: string }) => r.model === 'kiln/echo-fixture').predictions).toBe(1);
  });
});

describe('fair queuing', () => {
  type Done = { id: string; started_at: string; metrics: { queue_time: number } };
  let temporal: Client;
  beforeAll(async () => {
    const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' });
    temporal = new Client({ connection, namespace: process.env.TEMPORAL_NAMESPACE ?? 'kiln-test', dataConverter: testDataConverter() });
  });
  afterAll(() => temporal.connection.close());

  /** The prediction's predict task waits in the model's queue (Temporal's own view of it). */
  const inModelQueue = async (id: string) => {
    const d = await temporal.workflow.getHandle(predictionWorkflowId(id)).describe();
    return (d.raw.pendingActivities ?? []).some(
      (a) =>
        a.activityType?.name === 'predict' && a.state === temporalProto.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED,
    );
  };
  const allQueued = (ids: string[]) =>
    poll(
      () => Promise.all(ids.map(inModelQueue)),
      (q) => q.every(Boolean),
      { timeoutMs: 60_000, intervalMs: 250 },
    );

  /**
   * The fixture's 8 slots are taken by long predictions of `blockerToken`; `flood` then waits in
   * the model's queue, and `late` joins it last. Once every one of them is queued, the blockers
   * are canceled and the slots free up at once: the queue's order alone decides who goes first,
   * however slow the control plane was to get them there.
   */
  const race = async (blockerToken: string, flood: () => Promise<string[]>, late: () => Promise<{ token: string; id: string }>) => {
    const blockers = await Promise.all(Array.from({ length: 8 }, () => echo(blockerToken, { sleep_ms: 120_000 })));
    await poll(
      () => Promise.all(blockers.map((b) => get(blockerToken, b.body.id))),
      (rs) => rs.every((r) => r.body.status === 'processing'),
      { timeoutMs: 120_000, intervalMs: 250 },
    );
    const floodIds = await flood();
    await allQueued(floodIds);
    const last = await late();
    await allQueued([last.id]);
    for (const b of blockers) await api(`/v1/predictions/${b.body.id}/cancel`, { token: blockerToken, method: 'POST' });
    const lastDone: Done = await finished(last.token, last.id);
    return { lastDone, floodIds };
  };
  const startedAt = (p: Done) => Date.parse(p.started_at);
  // When a prediction joined the model's queue: the engine measures queue_time from the predict
  // task's scheduling.
  const enqueuedAt = (p: Done) => startedAt(p) - p.metrics.queue_time * 1000;
  /** Of the flood still waiting when `p` joined the queue, how many there were and how many went first. */
  const overtaking = (p: Done, flood: Done[]) => {
    const waiting = flood.filter((f) => enqueuedAt(f) <= enqueuedAt(p) && startedAt(f) > enqueuedAt(p));
    return { waiting: waiting.length, ahead: waiting.filter((f) => startedAt(f) < startedAt(p)).length };
  };

  test('a quiet account is not served last under a flood', async () => {
    const noisy = await newAccount(db, 'noisy');
    const quiet = await newAccount(db, 'quiet');
    const { lastDone, floodIds } = await race(
      noisy.token,
      async () =>
        (await Promise.all(Array.from({ length: 30 }, (_, i) => echo(noisy.token, { text: `n${i}`, sleep_ms: 200 })))).map(
          (r) => r.body.id,
        ),
      async () => ({ token: quiet.token, id: (await echo(quiet.token, { text: 'quiet', sleep_ms: 200 })).body.id }),
    );
    const flood: Done[] = await Promise.all(floodIds.map((id) => finished(noisy.token, id)));
    // First-in-first-out would serve all 30 first; fair queuing serves the quiet account as soon
    // as a slot frees (the 8 slots free within moments of each other, so a few may still go first).
    const { waiting, ahead } = overtaking(lastDone, flood);
    expect(waiting).toBe(30);
    expect(ahead).toBeLessThan(8);
    expect(lastDone.metrics.queue_time).toBeLessThan(Math.max(...flood.map((p) => p.metrics.queue_time)));
  });

  test("a changed account weight is the fair queue's weight for its next prediction, with no restart", async () => {
    const { account, token } = await newAccount(db, 'reweigh');
    const weightOf = async (id: string) => {
      const d = await temporal.workflow.getHandle(predictionWorkflowId(id)).describe();
      return d.raw.workflowExecutionInfo?.priority?.fairnessWeight;
    };
    const before = await echo(token, { text: 'w1' });
    expect(before.status).toBe(201);
    await updateAccount(db, account.id, { fairnessWeight: 3 });
    const after = await echo(token, { text: 'w3' });
    expect(after.status).toBe(201);
    expect(await weightOf(before.body.id)).toBe(1);
    expect(await weightOf(after.body.id)).toBe(3);
    await Promise.all([finished(token, before.body.id), finished(token, after.body.id)]);
  });

  test('an interactive call goes ahead of batch work of the same account', async () => {
    const { token } = await newAccount(db, 'prio');
    const { lastDone, floodIds } = await race(
      token,
      async () =>
        (
          await Promise.all(
            Array.from({ length: 30 }, (_, i) => echo(token, { text: `b${i}`, sleep_ms: 200 }, { 'kiln-priority': 'batch' })),
          )
        ).map((r) => r.body.id),
      async () => ({ token, id: (await echo(token, { text: 'now', sleep_ms: 200 }, { 'kiln-priority': 'interactive' })).body.id }),
    );
    const batch: Done[] = await Promise.all(floodIds.map((id) => finished(token, id)));
    // Priority is strict: it takes the first slot that frees.
    const { waiting, ahead } = overtaking(lastDone, batch);
    expect(waiting).toBe(30);
    expect(ahead).toBeLessThan(8);
    expect(
      (await api('/v1/models/kiln/echo-fixture/predictions', { token, body: { input: {} }, headers: { 'kiln-priority': 'urgent' } }))
        .status,
    ).toBe(422);
  });
});
