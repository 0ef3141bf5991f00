/** Webhooks end to end: real receivers on loopback, Standard Webhooks signatures, durable retries. */
import { WorkflowNotFoundError } from '@temporalio/client';
import { Webhook } from 'standardwebhooks';
import { closeDb, type Db } from '../../db/client';
import { webhookWorkflowId } from '../../domain/contracts';
import { PACED_TOKEN_MS, pacedLlama } from '../fixtures/models';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { freePort, type Receiver, startReceiver } from '../receiver';
import { testTemporal } from '../temporal';

jest.setTimeout(120_000);

let db: Db;
let token: string;
let secret: string;
let temporal: Awaited<ReturnType<typeof testTemporal>>;
const receivers: Receiver[] = [];

beforeAll(async () => {
  db = testDb();
  temporal = await testTemporal();
  token = (await newAccount(db, 'hooks')).token;
  const r = await api('/v1/webhooks/default/secret', { token });
  expect(r.status).toBe(200);
  secret = r.body.key;
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await temporal.close();
  await closeDb(db);
});

const receiver = async (opts: Parameters<typeof startReceiver>[0] = {}) => {
  const r = await startReceiver(opts);
  receivers.push(r);
  return r;
};

const create = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  api('/v1/models/kiln/tiny-llama/predictions', { token, body, headers });

const finished = (id: string) =>
  poll(
    () => api(`/v1/predictions/${id}`, { token }),
    (r) => TERMINAL.includes(r.body.status),
    { timeoutMs: 60_000 },
  ).then((r) => r.body);

const verify = (hook: { headers: Record<string, unknown>; body: string }, key = secret) =>
  new Webhook(key).verify(hook.body, hook.headers as Record<string, string>);

test('the secret is per account, stable, and whsec_-prefixed', async () => {
  expect(secret).toMatch(/^whsec_[A-Za-z0-9+/=]{40,}$/);
  expect((await api('/v1/webhooks/default/secret', { token })).body.key).toBe(secret);
  const { token: other } = await newAccount(db, 'hooks-other');
  expect((await api('/v1/webhooks/default/secret', { token: other })).body.key).not.toBe(secret);
});

test('start and completed arrive signed, with the prediction as it was', async () => {
  const rx = await receiver();
  const created = await create({
    input: { prompt: 'hooks', max_tokens: 8, min_tokens: 8 },
    webhook: rx.url,
    webhook_events_filter: ['start', 'completed'],
  });
  expect(created.status).toBe(201);
  expect(created.body.webhook).toBe(rx.url);
  const done = await finished(created.body.id);
  const hooks = await poll(
    async () => rx.accepted,
    (a) => a.some((h) => h.json.status === 'succeeded'),
  );
  for (const h of hooks) expect(() => verify(h)).not.toThrow();
  const start = hooks.find((h) => h.headers['webhook-id'] === `webhook-${done.id}-start-1`)!;
  expect(start.json.status).toBe('starting');
  const completed = hooks.find((h) => h.json.status === 'succeeded')!;
  expect(completed.headers['webhook-id']).toBe(`webhook-${done.id}-completed-1`);
  expect(completed.json.output).toEqual(done.output);
  expect(completed.json.id).toBe(done.id);
  expect(completed.json.metrics.predict_time).toBeGreaterThan(0);
  // The filter held: no output or logs events.
  expect(hooks.every((h) => /-(start|completed)-\d+$/.test(String(h.headers['webhook-id'])))).toBe(true);
  // A tampered body fails verification.
  expect(() => verify({ ...completed, body: completed.body.replace('succeeded', 'failed') })).toThrow();
});

test('output webhooks come at most once per 500 ms while generating', async () => {
  const rx = await receiver();
  // 150 paced tokens: at least 3 s of generation on any machine, so several output webhooks.
  await pacedLlama(db);
  const created = await api('/v1/models/kiln-test/paced-llama/predictions', {
    token,
    body: {
      input: { prompt: 'stream me', max_tokens: 150, min_tokens: 150 },
      webhook: rx.url,
      webhook_events_filter: ['output', 'completed'],
    },
  });
  expect(created.status).toBe(201);
  const id = created.body.id;
  const done = await finished(id);
  expect(done.metrics.predict_time).toBeGreaterThanOrEqual((150 * PACED_TOKEN_MS) / 1000);
  // What Kiln sent, from Temporal: one delivery workflow per output webhook, started when the
  // engine sent it (the receiver's clock and the delivery's latency play no part).
  const sent: number[] = [];
  for (let n = 1; ; n++) {
    const started = await temporal.client.workflow
      .getHandle(webhookWorkflowId(id, 'output', n))
      .describe()
      .then((d) => d.startTime.getTime())
      .catch((err) => {
        if (err instanceof WorkflowNotFoundError) return undefined;
        throw err;
      });
    if (started === undefined) break;
    sent.push(started);
  }
  // ...and what the receiver got: every one of them, once.
  const outputs = await poll(
    async () => rx.accepted.filter((h) => String(h.headers['webhook-id']).includes('-output-')),
    (o) => o.length >= sent.length,
  );
  expect(new Set(outputs.map((h) => h.headers['webhook-id']))).toEqual(new Set(sent.map((_, i) => webhookWorkflowId(id, 'output', i + 1))));
  expect(outputs).toHaveLength(sent.length);
  // Several while generating, at most one per 500 ms of it (plus the first, sent at once).
  expect(sent.length).toBeGreaterThanOrEqual(3);
  expect(sent.length).toBeLessThanOrEqual(Math.floor(done.metrics.predict_time / 0.5) + 2);
  // The throttle, as Temporal saw the sends: ~500 ms apart; a gap shrinks only by the jitter of
  // one start request against the next, never down to a burst.
  const gaps = sent
    .slice(1)
    .map((t, i) => t - sent[i])
    .sort((a, b) => a - b);
  expect(gaps[Math.floor(gaps.length / 2)]).toBeGreaterThanOrEqual(450);
  expect(gaps[0]).toBeGreaterThanOrEqual(250);
  // Each carries the output so far: it only grows.
  const nth = (h: (typeof outputs)[number]) => Number(String(h.headers['webhook-id']).split('-').pop());
  const lengths = [...outputs].sort((a, b) => nth(a) - nth(b)).map((h) => (h.json.output as string[]).length);
  expect([...lengths].sort((a, b) => a - b)).toEqual(lengths);
  for (const h of outputs) {
    expect(h.json.status).toBe('processing');
    expect(Array.isArray(h.json.output)).toBe(true);
  }
});

test('a receiver that fails its first attempts gets the event on a retry, and the log shows each attempt', async () => {
  const rx = await receiver({ failFirst: 2 });
  const created = await create({ input: { prompt: 'retry', max_tokens: 4 }, webhook: rx.url, webhook_events_filter: ['completed'] });
  const id = created.body.id;
  await finished(id);
  await poll(
    async () => rx.accepted,
    (a) => a.length === 1,
    { timeoutMs: 30_000 },
  );
  expect(rx.received.length).toBe(3);
  expect(new Set(rx.received.map((h) => h.headers['webhook-id']))).toEqual(new Set([`webhook-${id}-completed-1`]));
  const log = await poll(
    () => api(`/v1/predictions/${id}/webhooks`, { token }),
    (r) => r.body.results.length === 3,
  );
  expect(log.body.results.map((a: { attempt: number; status_code: number }) => [a.attempt, a.status_code])).toEqual([
    [1, 500],
    [2, 500],
    [3, 204],
  ]);
  for (const a of log.body.results) expect(a.latency_ms).toBeGreaterThanOrEqual(0);
});

test('a receiver that was down gets every completed event once it is back, once per webhook-id', async () => {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/hook`;
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await create({ input: { prompt: `down ${i}`, max_tokens: 4 }, webhook: url, webhook_events_filter: ['completed'] });
    ids.push(r.body.id);
  }
  await Promise.all(ids.map(finished));
  // Every first attempt was refused: the receiver is down.
  await poll(
    () => Promise.all(ids.map((id) => api(`/v1/predictions/${id}/webhooks`, { token }))),
    (rs) => rs.every((r) => r.body.results.length >= 1 && r.body.results[0].status_code === null),
  );
  const rx = await receiver({ port });
  const got = await poll(
    async () => rx.accepted,
    (a) => a.length >= 3,
    { timeoutMs: 60_000 },
  );
  const byId = new Map<string, number>();
  for (const h of got) byId.set(String(h.headers['webhook-id']), (byId.get(String(h.headers['webhook-id'])) ?? 0) + 1);
  expect([...byId.keys()].sort()).toEqual(ids.map((id) => `webhook-${id}-completed-1`).sort());
  expect([...byId.values()].every((n) => n === 1)).toBe(true);
});

test('410 Gone stops the retries', async () => {
  const rx = await receiver({ failFirst: 100, failWith: 410 });
  const r = await create({ input: { prompt: 'gone', max_tokens: 2 }, webhook: rx.url, webhook_events_filter: ['completed'] });
  await finished(r.body.id);
  await poll(
    async () => rx.received,
    (a) => a.length === 1,
  );
  const log = await poll(
    () => api(`/v1/predictions/${r.body.id}/webhooks`, { token }),
    (x) => x.body.results.length === 1,
  );
  expect(log.body.results[0].status_code).toBe(410);
  // The delivery is over (its workflow closed, with no retry left to make): still one attempt.
  const delivery = temporal.client.workflow.getHandle(webhookWorkflowId(r.body.id, 'completed', 1));
  await poll(
    () => delivery.describe(),
    (d) => d.status.name !== 'RUNNING',
  );
  expect(rx.received.length).toBe(1);
  expect((await api(`/v1/predictions/${r.body.id}/webhooks`, { token })).body.results).toHaveLength(1);
});

test('redelivery sends the completed event again with the same webhook-id', async () => {
  const rx = await receiver();
  const r = await create({ input: { prompt: 'again', max_tokens: 2 }, webhook: rx.url, webhook_events_filter: ['completed'] });
  await finished(r.body.id);
  await poll(
    async () => rx.accepted,
    (a) => a.length === 1,
  );
  const again = await api(`/v1/predictions/${r.body.id}/webhooks/redeliver`, { token, method: 'POST' });
  expect(again.status).toBe(202);
  await poll(
    async () => rx.accepted,
    (a) => a.length === 2,
  );
  expect(rx.accepted[1].headers['webhook-id']).toBe(rx.accepted[0].headers['webhook-id']);
  expect(rx.accepted[1].json.output).toEqual(rx.accepted[0].json.output);
});

test('after a rotation both secrets sign, so either verifies', async () => {
  const { token: t } = await newAccount(db, 'rotor');
  const oldKey = (await api('/v1/webhooks/default/secret', { token: t })).body.key;
  const rotated = await api('/v1/webhooks/default/secret/rotate', { token: t, method: 'POST' });
  expect(rotated.status).toBe(200);
  expect(rotated.body.key).not.toBe(oldKey);
  expect(Date.parse(rotated.body.previous_key_expires_at)).toBeGreaterThan(Date.now());
  expect((await api('/v1/webhooks/default/secret', { token: t })).body.key).toBe(rotated.body.key);
  const rx = await receiver();
  const p = await api('/v1/models/kiln/tiny-llama/predictions', {
    token: t,
    body: { input: { prompt: 'rot', max_tokens: 2 }, webhook: rx.url, webhook_events_filter: ['completed'] },
  });
  expect(p.status).toBe(201);
  const [hook] = await poll(
    async () => rx.accepted,
    (a) => a.length === 1,
  );
  expect(String(hook.headers['webhook-signature']).split(' ')).toHaveLength(2);
  expect(() => verify(hook, oldKey)).not.toThrow();
  expect(() => verify(hook, rotated.body.key)).not.toThrow();
});

test('webhook URLs are validated: scheme and private addresses (allowed on the local stack)', async () => {
  const bad = await create({ input: { prompt: 'x' }, webhook: 'ftp://example.com/hook' });
  expect(bad.status).toBe(422);
  expect(bad.body.invalid_fields[0].field).toBe('webhook');
  const filter = await create({ input: { prompt: 'x' }, webhook: 'http://127.0.0.1:9/x', webhook_events_filter: ['finished'] });
  expect(filter.status).toBe(422);
  expect(filter.body.detail).toMatch(/^webhook_events_filter/);
});
