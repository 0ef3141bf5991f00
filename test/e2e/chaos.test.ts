/**
 * Faults injected into real processes while predictions run: an API killed with SIGKILL in the
 * middle of creates, the Temporal server restarted, Postgres restarted. Each ends with every
 * prediction in the right terminal state with the right output, exactly one projection row per
 * prediction, one `done` per stream, and every completed webhook delivered.
 * (kill -9 of an engine worker mid-inference: failover.test.ts; a receiver that is down:
 * webhooks.test.ts.)
 */
import type { ChildProcess } from 'node:child_process';
import { and, eq, inArray, sql } from 'drizzle-orm';
import { closeDb, type Db } from '../../db/client';
import { predictionEvents, predictions } from '../../db/schema';
import { restartPostgres, restartTemporal, startApi } from '../chaos';
import { API_URL, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { startKilnProcess } from '../processes';
import { type Receiver, startReceiver } from '../receiver';
import { readSse } from '../sse';
import { startTcpProxy } from '../tcp-proxy';

jest.setTimeout(300_000);

let db: Db;
let receiver: Receiver;
let chaosApi: ChildProcess | undefined;

beforeAll(async () => {
  db = testDb();
  receiver = await startReceiver();
});
afterAll(async () => {
  chaosApi?.kill('SIGKILL');
  await receiver.close();
  await closeDb(db);
});

/** A read that rides out a dependency's restart: anything but a 200 counts as "not yet". */
async function readPrediction(token: string, id: string, base = API_URL) {
  try {
    const res = await fetch(`${base}/v1/predictions/${id}`, { headers: { authorization: `Bearer ${token}` } });
    return res.status === 200 ? ((await res.json()) as any) : { status: `http ${res.status}` };
  } catch (err) {
    return { status: `unreachable: ${(err as Error).message}` };
  }
}

async function createEcho(token: string, text: string, opts: { base?: string; key?: string; sleepMs?: number } = {}) {
  const res = await fetch(`${opts.base ?? API_URL}/v1/models/kiln/echo-fixture/predictions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      ...(opts.key ? { 'idempotency-key': opts.key } : {}),
    },
    body: JSON.stringify({ input: { text, sleep_ms: opts.sleepMs ?? 3_000 }, webhook: receiver.url, webhook_events_filter: ['completed'] }),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

/** Status 0: no answer (the connection was refused or cut). */
const tryCreateEcho = (...args: Parameters<typeof createEcho>) =>
  createEcho(...args).catch(() => ({ status: 0, headers: new Headers(), body: null as any }));

/** The end state every fault must leave: right outputs, one row, one `done`, one delivered webhook each. */
async function expectAllSucceeded(token: string, accountId: string, expected: Map<string, string>) {
  const ids = [...expected.keys()];
  for (const id of ids) {
    const p = await poll(
      () => readPrediction(token, id),
      (p) => TERMINAL.includes(p.status),
      { timeoutMs: 120_000, intervalMs: 250 },
    );
    expect({ id, status: p.status, output: p.output, error: p.error }).toEqual({
      id,
      status: 'succeeded',
      output: expected.get(id),
      error: null,
    });
  }
  const rows = await db.select({ id: predictions.id }).from(predictions).where(eq(predictions.accountId, accountId));
  expect(rows.map((r) => r.id).sort()).toEqual([...ids].sort());
  const done = await db
    .select({ id: predictionEvents.predictionId, n: sql<number>`count(*)::int` })
    .from(predictionEvents)
    .where(and(inArray(predictionEvents.predictionId, ids), eq(predictionEvents.event, 'done')))
    .groupBy(predictionEvents.predictionId);
  expect(Object.fromEntries(done.map((d) => [d.id, d.n]))).toEqual(Object.fromEntries(ids.map((id) => [id, 1])));
  const delivered = await poll(
    async () => new Set(receiver.accepted.filter((h) => h.json?.status === 'succeeded').map((h) => h.json.id)),
    (got) => ids.every((id) => got.has(id)),
    { timeoutMs: 60_000, intervalMs: 250 },
  );
  expect(ids.filter((id) => !delivered.has(id))).toEqual([]);
}

test('kill -9 of an API process in the middle of creates: retried with their Idempotency-Key, each makes exactly one prediction', async () => {
  const { account, token } = await newAccount(db, 'chaos-api');
  const port = Number(process.env.PORT ?? 8081) + 7;
  const base = `http://127.0.0.1:${port}`;
  chaosApi = await startApi(port);

  const keys = Array.from({ length: 12 }, (_, i) => `chaos-create-${account.id}-${i}`);
  const first = keys.map((key, i) =>
    createEcho(token, `item ${i}`, { base, key, sleepMs: 500 }).then(
      (r) => ({ key, ok: r.status === 201, id: r.body.id as string | undefined }),
      () => ({ key, ok: false, id: undefined }),
    ),
  );
  // Killed while requests are in flight: some got an answer, some were cut off mid-create.
  await poll(
    async () => (await db.select({ n: sql<number>`count(*)::int` }).from(predictions).where(eq(predictions.accountId, account.id)))[0].n,
    (n) => n >= 1,
    {
      timeoutMs: 30_000,
      intervalMs: 5,
    },
  );
  chaosApi.kill('SIGKILL');
  const outcomes = await Promise.all(first);
  // The kill cut creates off mid-flight (else the retries below would prove nothing).
  expect(outcomes.filter((o) => !o.ok).length).toBeGreaterThan(0);
  chaosApi = await startApi(port);

  const expected = new Map<string, string>();
  for (const [i, o] of outcomes.entries()) {
    // A client that got no answer retries with the same key; one that did may retry too.
    const again = await createEcho(token, `item ${i}`, { base, key: o.key, sleepMs: 500 });
    expect([200, 201]).toContain(again.status);
    if (o.id) expect(again.body.id).toBe(o.id);
    expected.set(again.body.id, `item ${i}`);
  }
  expect(expected.size).toBe(keys.length);
  chaosApi.kill('SIGTERM');
  chaosApi = undefined;
  await expectAllSucceeded(token, account.id, expected);
});

test('the Temporal server restarts while predictions run: all finish, and creates during the outage get 503 then succeed', async () => {
  const { account, token } = await newAccount(db, 'chaos-temporal');
  const expected = new Map<string, string>();
  for (let i = 0; i < 6; i++) {
    const r = await createEcho(token, `before restart ${i}`, { sleepMs: 4_000 });
    expect(r.status).toBe(201);
    expected.set(r.body.id, `before restart ${i}`);
  }
  await poll(
    () => Promise.all([...expected.keys()].map((id) => readPrediction(token, id))),
    (ps) => ps.some((p) => p.status === 'processing'),
    {
      timeoutMs: 60_000,
      intervalMs: 100,
    },
  );

  const restarting = restartTemporal();
  // While it is down, a create is refused with a retryable 503 (never a 500), and a retry with
  // the same key after it is back makes exactly one prediction.
  const key = `chaos-temporal-${account.id}`;
  const during = await createEcho(token, 'during restart', { key, sleepMs: 100 });
  // Held by the Temporal client's retries (~20 s) until the server is back, or refused once
  // they ran out: never a 500.
  expect([201, 503]).toContain(during.status);
  const downMs = await restarting;
  const after = await poll(
    () => tryCreateEcho(token, 'during restart', { key, sleepMs: 100 }),
    (r) => r.status === 201 || r.status === 200,
    {
      timeoutMs: 60_000,
      intervalMs: 500,
    },
  );
  if (during.status === 201) expect(after.body.id).toBe(during.body.id);
  // Refused, every time: an API of its own reaches Temporal through a proxy the test cuts for
  // longer than those retries; its create gets 503 with Retry-After, and the retry with the same
  // key once Temporal is reachable again makes exactly one prediction (expectAllSucceeded).
  const proxy = await startTcpProxy(process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233');
  const cutPort = Number(process.env.PORT ?? 8081) + 8;
  const cutApi = await startKilnProcess('api/index.ts', `api-${cutPort}`, { PORT: String(cutPort), TEMPORAL_ADDRESS: proxy.address });
  try {
    const viaCut = { base: `http://127.0.0.1:${cutPort}`, key: `${key}-cut`, sleepMs: 100 };
    await proxy.cut();
    const refused = await createEcho(token, 'while cut off', viaCut);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('2');
    expect(refused.body.detail).toMatch(/Temporal is unavailable/);
    await proxy.restore();
    const retried = await poll(
      () => tryCreateEcho(token, 'while cut off', viaCut),
      (r) => r.status === 201,
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    expected.set(retried.body.id, 'while cut off');
  } finally {
    cutApi.kill('SIGKILL');
    await proxy.close();
  }
  expected.set(after.body.id, 'during restart');
  console.log(`Temporal was unreachable for ${downMs} ms`);
  await expectAllSucceeded(token, account.id, expected);
});

test('Postgres restarts while predictions run: all finish, projections and streams stay whole', async () => {
  const { account, token } = await newAccount(db, 'chaos-postgres');
  const expected = new Map<string, string>();
  for (let i = 0; i < 6; i++) {
    const r = await createEcho(token, `pg ${i}`, { sleepMs: 3_000 });
    expect(r.status).toBe(201);
    expected.set(r.body.id, `pg ${i}`);
  }
  await poll(
    () => Promise.all([...expected.keys()].map((id) => readPrediction(token, id))),
    (ps) => ps.some((p) => p.status === 'processing'),
    {
      timeoutMs: 60_000,
      intervalMs: 100,
    },
  );
  const ms = await restartPostgres();
  console.log(`Postgres restart took ${ms} ms`);

  // The API is back on its feet: a new prediction streams to its end through LISTEN/NOTIFY,
  // which had to reconnect.
  const fresh = await poll(
    () => tryCreateEcho(token, 'after the restart', { sleepMs: 1_500 }),
    (r) => r.status === 201,
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  expected.set(fresh.body.id, 'after the restart');
  const stream = await readSse(fresh.body.urls.stream, { until: (e) => e.event === 'done' });
  expect(stream.events.filter((e) => e.event === 'done')).toHaveLength(1);
  await expectAllSucceeded(token, account.id, expected);
});
