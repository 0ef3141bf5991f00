/**
 * The two ends of webhook retries the README promises: a receiver's Retry-After sets the wait
 * before the next attempt, and a receiver that never takes the event gets exactly
 * KILN_WEBHOOK_MAX_ATTEMPTS attempts (the suite runs with 6, retry schedule 1s,1s,2s), after
 * which the delivery is over for good.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { closeDb, type Db } from '../../db/client';
import { webhookWorkflowId } from '../../domain/contracts';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { type Receiver, startReceiver } from '../receiver';
import { testTemporal } from '../temporal';

jest.setTimeout(120_000);

const MAX_ATTEMPTS = Number(process.env.KILN_WEBHOOK_MAX_ATTEMPTS ?? 6);

let db: Db;
let token: string;
let temporal: Awaited<ReturnType<typeof testTemporal>>;
const receivers: Receiver[] = [];

beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'hook-limits')).token;
  temporal = await testTemporal();
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await temporal.close();
  await closeDb(db);
});

async function predictionWithWebhook(url: string): Promise<string> {
  const created = await api('/v1/models/kiln/tiny-llama/predictions', {
    token,
    body: { input: { prompt: 'hook', max_tokens: 2 }, webhook: url, webhook_events_filter: ['completed'] },
  });
  expect(created.status).toBe(201);
  const id: string = created.body.id;
  await poll(
    () => api(`/v1/predictions/${id}`, { token }),
    (r) => TERMINAL.includes(r.body.status),
    { timeoutMs: 60_000 },
  );
  return id;
}

const deliveryLog = (id: string) => api(`/v1/predictions/${id}/webhooks`, { token });

test("a receiver's Retry-After holds the next attempt back at least that long, over the shorter schedule", async () => {
  // The suite's schedule would retry after 1 s; the receiver asks for 3.
  const rx = await startReceiver({ failFirst: 1, failWith: 503, retryAfter: '3' });
  receivers.push(rx);
  const id = await predictionWithWebhook(rx.url);
  const [first, second] = await poll(
    async () => rx.received,
    (r) => r.length >= 2,
    { timeoutMs: 30_000 },
  );
  expect(second.at - first.at).toBeGreaterThanOrEqual(3_000);
  expect(rx.accepted).toHaveLength(1);
  const log = await poll(
    () => deliveryLog(id),
    (r) => r.body.results.length === 2,
  );
  expect(log.body.results.map((a: { attempt: number; status_code: number }) => [a.attempt, a.status_code])).toEqual([
    [1, 503],
    [2, 204],
  ]);
});

test('a receiver that always fails gets exactly the maximum number of attempts, and then the delivery has failed for good', async () => {
  const rx = await startReceiver({ failFirst: Number.MAX_SAFE_INTEGER, failWith: 500 });
  receivers.push(rx);
  const id = await predictionWithWebhook(rx.url);
  const handle = temporal.client.workflow.getHandle(webhookWorkflowId(id, 'completed', 1));
  // The delivery workflow closes when it gives up; nothing can attempt the event after that.
  // (The prediction reads as finished a moment before it starts the delivery.)
  const closed = await poll(
    () => handle.describe().catch((err: Error) => (err instanceof WorkflowNotFoundError ? undefined : Promise.reject(err))),
    (d) => d !== undefined && d.status.name !== 'RUNNING',
    { timeoutMs: 60_000, intervalMs: 250 },
  );
  expect(closed!.status.name).toBe('FAILED');
  await expect(handle.result()).rejects.toMatchObject({ cause: { cause: { type: 'WebhookGaveUp' } } });

  const log = await deliveryLog(id);
  expect(log.status).toBe(200);
  const attempts = log.body.results.map((a: { attempt: number; status_code: number | null; error: string | null }) => a);
  expect(attempts.map((a: { attempt: number }) => a.attempt)).toEqual(Array.from({ length: MAX_ATTEMPTS }, (_, i) => i + 1));
  for (const a of attempts) {
    expect(a.status_code).toBe(500);
    expect(a.error).toBe('receiver answered 500');
  }
  expect(rx.received).toHaveLength(MAX_ATTEMPTS);
  expect(rx.accepted).toHaveLength(0);
  expect(new Set(rx.received.map((h) => h.headers['webhook-id']))).toEqual(new Set([`webhook-${id}-completed-1`]));
});
