/**
 * What one account can make Kiln's webhooks do stays bounded: secret rotations never put more than
 * two signatures on a delivery, and redeliveries of one prediction never send more than one
 * delivery's schedule at a time. Both are rate-limited per account.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { and, eq, gt, isNull, or, sql } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { updateAccount } from '../../db/accounts';
import { closeDb, type Db } from '../../db/client';
import { webhookSecrets } from '../../db/schema';
import { rotateWebhookSecret, signingSecrets } from '../../db/webhooks';
import { redeliveryWorkflowId, webhookWorkflowId } from '../../domain/contracts';
import { config } from '../../lib/config';
import { secretBoxFromConfig } from '../../lib/secret-box';
import { type ApiResponse, api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { type Receiver, startReceiver } from '../receiver';
import { testTemporal } from '../temporal';

jest.setTimeout(120_000);

let db: Db;
let temporal: Awaited<ReturnType<typeof testTemporal>>;
const receivers: Receiver[] = [];

beforeAll(async () => {
  db = testDb();
  temporal = await testTemporal();
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

/** `n` calls, `width` at a time, in order of sending. */
async function inWaves(n: number, width: number, call: () => Promise<ApiResponse>): Promise<ApiResponse[]> {
  const answers: ApiResponse[] = [];
  for (let sent = 0; sent < n; sent += width) {
    answers.push(...(await Promise.all(Array.from({ length: Math.min(width, n - sent) }, call))));
  }
  return answers;
}

const expectRateLimited = (r: ApiResponse, what: RegExp) => {
  expect(r.status).toBe(429);
  expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  expect(r.body.detail).toMatch(what);
  expect(r.body.detail).toContain(`Rate limit of ${r.headers.get('x-ratelimit-limit')} `);
};

async function finishedWithWebhook(token: string, url: string): Promise<string> {
  const created = await api('/v1/models/kiln/tiny-llama/predictions', {
    token,
    body: { input: { prompt: 'bounds', max_tokens: 2 }, webhook: url, webhook_events_filter: ['completed'] },
  });
  expect(created.status).toBe(201);
  await poll(
    () => api(`/v1/predictions/${created.body.id}`, { token }),
    (r) => TERMINAL.includes(r.body.status),
    { timeoutMs: 60_000 },
  );
  return created.body.id;
}

/** Waits until the workflow has run and closed. */
const closed = (workflowId: string) =>
  poll(
    () =>
      temporal.client.workflow
        .getHandle(workflowId)
        .describe()
        .then((d) => d.status.name)
        .catch((err: unknown) => {
          if (err instanceof WorkflowNotFoundError) return 'NOT_FOUND';
          throw err;
        }),
    (status) => status !== 'RUNNING' && status !== 'NOT_FOUND',
    { timeoutMs: 60_000, intervalMs: 200 },
  );

test('100 rotations leave at most two secrets signing, and rotations past the limit get 429', async () => {
  const { account, token } = await newAccount(db, 'rotations');
  const first = (await api('/v1/webhooks/default/secret', { token })).body.key;
  // One after another, as fast as they go, so the keys come back in the order they were made.
  const answers = await inWaves(100, 1, () => api('/v1/webhooks/default/secret/rotate', { token, method: 'POST' }));

  const rotated = answers.filter((r) => r.status === 200);
  expect(rotated.length).toBeGreaterThanOrEqual(2);
  const limit = Number(rotated[0].headers.get('x-ratelimit-limit'));
  // A burst may straddle two one-minute windows, never more.
  expect(rotated.length).toBeLessThanOrEqual(2 * limit);
  const refused = answers.filter((r) => r.status !== 200);
  expect(refused.length).toBeGreaterThan(0);
  for (const r of refused) expectRateLimited(r, /webhook secret rotations per minute/);

  const inForce = await db
    .select({ id: webhookSecrets.id })
    .from(webhookSecrets)
    .where(and(eq(webhookSecrets.accountId, account.id), or(isNull(webhookSecrets.expiresAt), gt(webhookSecrets.expiresAt, sql`now()`))));
  expect(inForce.length).toBeLessThanOrEqual(2);

  // A delivery carries the current and the previous secret's signatures, and no older one.
  const current = (await api('/v1/webhooks/default/secret', { token })).body.key;
  const keys = answers.filter((r) => r.status === 200).map((r) => r.body.key);
  expect(current).toBe(keys.at(-1));
  const rx = await receiver();
  await finishedWithWebhook(token, rx.url);
  const [hook] = await poll(
    async () => rx.accepted,
    (a) => a.length === 1,
  );
  const signatures = String(hook.headers['webhook-signature']).split(' ');
  expect(signatures).toHaveLength(2);
  const verifies = (key: string) => {
    try {
      new Webhook(key).verify(hook.body, hook.headers as Record<string, string>);
      return true;
    } catch {
      return false;
    }
  };
  expect(verifies(current)).toBe(true);
  expect(verifies(keys.at(-2))).toBe(true);
  expect(verifies(first)).toBe(false);
});

test('the bound holds without the rate limit: 100 rotations leave the last two signing', async () => {
  const { account } = await newAccount(db, 'rotations-unlimited');
  const box = secretBoxFromConfig(config());
  const keys: string[] = [];
  for (let i = 0; i < 100; i++) keys.push((await rotateWebhookSecret(db, box, account.id)).key);
  expect(await signingSecrets(db, box, account.id)).toEqual([keys[99], keys[98]]);
  const stored = await db.select({ id: webhookSecrets.id }).from(webhookSecrets).where(eq(webhookSecrets.accountId, account.id));
  expect(stored).toHaveLength(2);
});

test('30 concurrent redeliveries of one prediction send at most one delivery schedule', async () => {
  const { token } = await newAccount(db, 'redeliveries');
  // Every attempt fails, so each delivery runs its whole retry schedule.
  const rx = await receiver({ failFirst: 1_000_000, failWith: 500 });
  const id = await finishedWithWebhook(token, rx.url);
  await closed(webhookWorkflowId(id, 'completed', 1));
  const oneSchedule = rx.received.length;
  expect(oneSchedule).toBeGreaterThan(1);

  const answers = await Promise.all(
    Array.from({ length: 30 }, () => api(`/v1/predictions/${id}/webhooks/redeliver`, { token, method: 'POST' })),
  );
  const accepted = answers.filter((r) => r.status === 202);
  expect(accepted.length).toBeGreaterThan(0);
  // One started the redelivery; every other accepted call names that same one.
  expect(accepted.filter((r) => r.body.started === true)).toHaveLength(1);
  expect(new Set(accepted.map((r) => r.body.delivery))).toEqual(new Set([redeliveryWorkflowId(id)]));
  for (const r of answers.filter((a) => a.status !== 202)) expectRateLimited(r, /webhook redeliveries per minute/);

  await closed(redeliveryWorkflowId(id));
  const redelivered = rx.received.slice(oneSchedule);
  expect(redelivered.length).toBeLessThanOrEqual(oneSchedule);
  expect(redelivered.length).toBeGreaterThan(0);
  expect(new Set(redelivered.map((h) => h.headers['webhook-id']))).toEqual(new Set([webhookWorkflowId(id, 'completed', 1)]));
});

test('redeliveries past the per-account limit get 429, and each call counts', async () => {
  const { token } = await newAccount(db, 'redelivery-limit');
  const rx = await receiver();
  const id = await finishedWithWebhook(token, rx.url);
  const first = await api(`/v1/predictions/${id}/webhooks/redeliver`, { token, method: 'POST' });
  expect(first.status).toBe(202);
  const limit = Number(first.headers.get('x-ratelimit-limit'));
  expect(Number(first.headers.get('x-ratelimit-remaining'))).toBe(limit - 1);
  const rest = await inWaves(2 * limit + 1, 5, () => api(`/v1/predictions/${id}/webhooks/redeliver`, { token, method: 'POST' }));
  const refused = rest.filter((r) => r.status !== 202);
  expect(refused.length).toBeGreaterThan(0);
  for (const r of refused) expectRateLimited(r, /webhook redeliveries per minute/);
});

test("redeliveries in flight count against the account's max_running, apart from its predictions", async () => {
  const { account, token } = await newAccount(db, 'redelivery-running');
  const answering = await receiver();
  const ids = [await finishedWithWebhook(token, answering.url), await finishedWithWebhook(token, answering.url)];
  await poll(
    async () => answering.accepted.length,
    (n) => n === 2,
  );
  await answering.close();
  // The same address now answers 503 with a long Retry-After, so a redelivery stays in flight.
  await receiver({ port: answering.port, failFirst: 1_000_000, failWith: 503, retryAfter: '600' });
  await updateAccount(db, account.id, { maxRunning: 1 });
  const redeliver = (id: string) => api(`/v1/predictions/${id}/webhooks/redeliver`, { token, method: 'POST' });
  const inFlight = () =>
    temporal.client.workflow
      .count(`WorkflowType = 'webhookDeliveryWorkflow' AND KilnAccount = '${account.username}' AND ExecutionStatus = 'Running'`)
      .then((c) => c.count);
  try {
    const first = await redeliver(ids[0]);
    expect(first.status).toBe(202);
    expect(first.body.started).toBe(true);
    await poll(inFlight, (n) => n === 1);
    // Asked again, the one in flight is the answer, not a 429.
    const again = await redeliver(ids[0]);
    expect(again.status).toBe(202);
    expect(again.body.started).toBe(false);

    const refused = await redeliver(ids[1]);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(refused.body.detail).toMatch(/1 webhook redeliveries are in flight for this account \(max_running 1\)/);

    // The account's predictions are not held back by its redeliveries.
    const predicted = await api('/v1/models/kiln/tiny-llama/predictions', {
      token,
      body: { input: { prompt: 'still mine', max_tokens: 2 } },
      headers: { Prefer: 'wait=60' },
    });
    expect(predicted.body.status).toBe('succeeded');

    await temporal.client.workflow.getHandle(redeliveryWorkflowId(ids[0])).terminate('test: the receiver is gone');
    await poll(inFlight, (n) => n === 0);
    const next = await redeliver(ids[1]);
    expect(next.status).toBe(202);
    expect(next.body.started).toBe(true);
  } finally {
    for (const id of ids) {
      await temporal.client.workflow
        .getHandle(redeliveryWorkflowId(id))
        .terminate('test over')
        .catch(() => undefined);
    }
  }
});
