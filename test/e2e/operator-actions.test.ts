/**
 * What an operator does to a prediction's workflow with Temporal's own tools (the client here,
 * as the CLI and the UI do), and what the HTTP API shows afterwards: the prediction's JSON, its
 * stream, its completed webhook and its account's admission slot follow within seconds, and
 * usage is recorded once. Terminated workflows are finished by the reconciler.
 */
import { eq } from 'drizzle-orm';
import { updateAccount } from '../../db/accounts';
import { closeDb, type Db } from '../../db/client';
import { usageRecords } from '../../db/schema';
import { pacedLlama } from '../fixtures/models';
import { api, newAccount, poll, testDb, testTemporal, TERMINAL } from '../helpers';
import { startReceiver, type Receiver } from '../receiver';
import { readSse } from '../sse';
import type { Client } from '@temporalio/client';

jest.setTimeout(240_000);

const PACED = '/v1/models/kiln-test/paced-llama/predictions';

let db: Db;
let temporal: { client: Client; close: () => Promise<void> };
let receiver: Receiver;
beforeAll(async () => {
  db = testDb();
  temporal = await testTemporal();
  receiver = await startReceiver();
  await pacedLlama(db);
});
afterAll(async () => {
  await receiver.close();
  await temporal.close();
  await closeDb(db);
});

const get = (token: string, id: string) => api(`/v1/predictions/${id}`, { token });
const ended = (token: string, id: string, timeoutMs = 60_000) =>
  poll(() => get(token, id), (r) => TERMINAL.includes(r.body.status), { timeoutMs, intervalMs: 100 }).then((r) => r.body);
const load = (token: string) => api('/v1/account', { token }).then((r) => r.body.current as { admitted: number; queued: number });
const usageRows = (id: string) => db.select().from(usageRecords).where(eq(usageRecords.predictionId, id));
const handle = (id: string) => temporal.client.workflow.getHandle(`prediction-${id}`);

/** A fresh account allowed one running prediction at a time: a slot left taken shows at once. */
async function oneAtATime(prefix: string) {
  const a = await newAccount(db, prefix);
  await updateAccount(db, a.account.id, { maxRunning: 1 });
  return a;
}

/** A paced generation that runs for a minute or more, with a completed webhook, seen processing. */
async function longPrediction(token: string) {
  const created = await api(PACED, {
    token,
    body: { input: { prompt: 'go on', max_tokens: 3000, min_tokens: 3000 }, webhook: receiver.url, webhook_events_filter: ['completed'] },
  });
  expect(created.status).toBe(201);
  await poll(() => get(token, created.body.id), (r) => r.body.status === 'processing', { timeoutMs: 90_000 });
  return created.body as { id: string; urls: { stream: string } };
}

/** The account's slot is free again: a new prediction over its cap of 1 runs to the end. */
async function expectSlotFree(token: string) {
  await poll(() => load(token), (c) => c.admitted === 0, { timeoutMs: 30_000 });
  const next = await api(PACED, { token, body: { input: { prompt: 'next', max_tokens: 3 } } });
  expect(next.status).toBe(201);
  expect((await ended(token, next.body.id)).status).toBe('succeeded');
}

const completedHooks = (id: string) => receiver.accepted.filter((h) => h.json?.id === id);

test('terminate: the reconciler finishes the prediction as failed, closes its stream, sends its completed webhook, frees its slot and records usage once', async () => {
  const me = await oneAtATime('op-terminate');
  const p = await longPrediction(me.token);
  const stream = readSse(p.urls.stream, { until: (e) => e.event === 'done' });

  await handle(p.id).terminate('stuck on a bad node');
  const started = Date.now();
  const finished = await ended(me.token, p.id, 45_000);
  const tookMs = Date.now() - started;
  expect(finished.status).toBe('failed');
  expect(finished.error).toBe('terminated by an operator: stuck on a bad node');
  expect(finished.completed_at).not.toBeNull();
  expect(finished.logs).toContain('terminated by an operator: stuck on a bad node');
  console.log(`terminated prediction finished by the reconciler in ${tookMs} ms`);

  const { events } = await stream;
  expect(events.map((e) => e.event).slice(-2)).toEqual(['error', 'done']);
  expect(JSON.parse(events[events.length - 1].data)).toEqual({ reason: 'failed' });

  const hook = await poll(async () => completedHooks(p.id), (h) => h.length > 0, { timeoutMs: 30_000 });
  expect(hook[0].json.status).toBe('failed');
  expect(hook[0].json.error).toBe('terminated by an operator: stuck on a bad node');

  await expectSlotFree(me.token);
  expect(await usageRows(p.id)).toHaveLength(1);
  // Later ticks find nothing more to do: still one usage record, one completed webhook.
  const reconciler = temporal.client.workflow.getHandle('kiln-reconciler');
  const eventsNow = (await reconciler.describe()).historyLength;
  // Two more ticks at least (each one: a workflow task, the activity, the timer).
  await poll(async () => (await reconciler.describe()).historyLength, (n) => n >= eventsNow + 16 || n < eventsNow, { timeoutMs: 60_000, intervalMs: 500 });
  expect(await usageRows(p.id)).toHaveLength(1);
  expect(completedHooks(p.id)).toHaveLength(1);
});
