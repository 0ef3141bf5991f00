/**
 * What an operator does to a prediction's workflow with Temporal's own tools (the client here,
 * as the CLI and the UI do), and what the HTTP API shows afterwards: the prediction's JSON, its
 * stream, its completed webhook and its account's admission slot follow within seconds, and
 * usage is recorded once. Terminated workflows are finished by the reconciler.
 */
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { eq } from 'drizzle-orm';
import { updateAccount } from '../../db/accounts';
import { closeDb, type Db } from '../../db/client';
import { usageRecords } from '../../db/schema';
import type { BatchChunkRequest } from '../../domain/batch-contracts';
import { echoFixtureVersion } from '../fixtures/echo-versions';
import { pacedLlama } from '../fixtures/models';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { type Receiver, startReceiver } from '../receiver';
import { readSse } from '../sse';
import { testTemporal } from '../temporal';
import { temporalCli } from '../temporal-cli';

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
  poll(
    () => get(token, id),
    (r) => TERMINAL.includes(r.body.status),
    { timeoutMs, intervalMs: 100 },
  ).then((r) => r.body);
const load = (token: string) => api('/v1/account', { token }).then((r) => r.body.current as { admitted: number; queued: number });
const usageRows = (id: string) => db.select().from(usageRecords).where(eq(usageRecords.predictionId, id));
const handle = (id: string) => temporal.client.workflow.getHandle(`prediction-${id}`);

/** A fresh account allowed one running prediction at a time: a slot left taken shows at once. */
async function oneAtATime(prefix: string) {
  const a = await newAccount(db, prefix);
  await updateAccount(db, a.account.id, { maxRunning: 1 });
  return a;
}

/**
 * A paced generation (20 ms a token: 3000 tokens run for a minute or more), with a completed
 * webhook, seen processing.
 */
async function longPrediction(token: string, tokens = 3000) {
  const created = await api(PACED, {
    token,
    body: {
      input: { prompt: 'go on', max_tokens: tokens, min_tokens: tokens },
      webhook: receiver.url,
      webhook_events_filter: ['completed'],
    },
  });
  expect(created.status).toBe(201);
  await poll(
    () => get(token, created.body.id),
    (r) => r.body.status === 'processing',
    { timeoutMs: 90_000 },
  );
  return created.body as { id: string; urls: { stream: string } };
}

/** The account's slot is free again: a new prediction over its cap of 1 runs to the end. */
async function expectSlotFree(token: string) {
  await poll(
    () => load(token),
    (c) => c.admitted === 0,
    { timeoutMs: 30_000 },
  );
  const next = await api(PACED, { token, body: { input: { prompt: 'next', max_tokens: 3 } } });
  expect(next.status).toBe(201);
  expect((await ended(token, next.body.id)).status).toBe('succeeded');
}

/** The control worker's count of the reconciler's looks (lib/metrics.ts). */
async function reconcilerLooks(): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${process.env.KILN_CONTROL_METRICS_PORT ?? 9474}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('kiln_reconciler_looks_total '));
  return line ? Number(line.slice('kiln_reconciler_looks_total '.length)) : 0;
}

const runIdOf = async (id: string) => (await handle(id).describe()).runId;

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

  const hook = await poll(
    async () => completedHooks(p.id),
    (h) => h.length > 0,
    { timeoutMs: 30_000 },
  );
  expect(hook[0].json.status).toBe('failed');
  expect(hook[0].json.error).toBe('terminated by an operator: stuck on a bad node');

  await expectSlotFree(me.token);
  expect(await usageRows(p.id)).toHaveLength(1);
  // Later looks find nothing more to do: still one usage record, one completed webhook.
  const looksNow = await reconcilerLooks();
  // Two more looks at least (fewer after a restart of the control worker, whose count starts again).
  await poll(reconcilerLooks, (n) => n >= looksNow + 2 || n < looksNow, { timeoutMs: 60_000, intervalMs: 500 });
  expect(await usageRows(p.id)).toHaveLength(1);
  expect(completedHooks(p.id)).toHaveLength(1);
});

test('reset to the first workflow task after a terminate: the new run runs again and its writes win; the stream restarts; usage stays once', async () => {
  const me = await oneAtATime('op-reset-first');
  // 400 paced tokens: eight seconds or more, so the reset run finishes soon.
  const p = await longPrediction(me.token, 400);
  const oldRun = await runIdOf(p.id);
  await handle(p.id).terminate('reset me');
  const failed = await ended(me.token, p.id, 45_000);
  expect(failed.status).toBe('failed');
  expect((await usageRows(p.id)).map((u) => u.status)).toEqual(['failed']);

  await temporalCli('workflow', 'reset', '-w', `prediction-${p.id}`, '--type', 'FirstWorkflowTask', '--reason', 'run it again');
  expect(await runIdOf(p.id)).not.toBe(oldRun);
  // The old run's end is gone from the row: the new run's revisions start again from 1 and still win.
  const succeeded = await poll(
    () => get(me.token, p.id),
    (r) => r.body.status === 'succeeded',
    { timeoutMs: 90_000, intervalMs: 200 },
  );
  expect(succeeded.body.error).toBeNull();
  expect(succeeded.body.metrics.output_token_count).toBe(400);

  // A client reading the stream from the start gets one done, the new run's, after a reset.
  const { events } = await readSse(p.urls.stream, { until: (e) => e.event === 'done' });
  const names = events.map((e) => e.event);
  expect(names.filter((e) => e === 'done')).toHaveLength(1);
  expect(names).toContain('reset');
  expect(names[names.length - 1]).toBe('done');
  expect(events[events.length - 1].data).toBe('{}');

  // The completed webhook of the new run arrives (the old run's said failed).
  await poll(
    async () => completedHooks(p.id).map((h) => h.json.status),
    (s) => s.includes('succeeded'),
    { timeoutMs: 30_000 },
  );
  await expectSlotFree(me.token);
  // Usage is counted once: the first finish recorded it.
  expect(await usageRows(p.id)).toHaveLength(1);
});

test('reset to the last workflow task while processing: the run goes on as a new run and ends succeeded, usage once, slot free', async () => {
  const me = await oneAtATime('op-reset-last');
  const p = await longPrediction(me.token, 400);
  const oldRun = await runIdOf(p.id);
  await temporalCli(
    'workflow',
    'reset',
    '-w',
    `prediction-${p.id}`,
    '--type',
    'LastWorkflowTask',
    '--reason',
    'operator reset while running',
  );
  expect(await runIdOf(p.id)).not.toBe(oldRun);
  const done = await ended(me.token, p.id, 120_000);
  expect(done.status).toBe('succeeded');
  expect(done.metrics.output_token_count).toBe(400);
  await expectSlotFree(me.token);
  expect(await usageRows(p.id)).toHaveLength(1);
});

test('reset to a chosen event (the first workflow task completed) of a succeeded prediction: it runs again and the API shows the new run', async () => {
  const me = await oneAtATime('op-reset-event');
  const created = await api(PACED, { token: me.token, body: { input: { prompt: 'twice', max_tokens: 5, seed: 3 } } });
  const first = await ended(me.token, created.body.id);
  expect(first.status).toBe('succeeded');
  const history = await handle(created.body.id).fetchHistory();
  const firstTaskCompleted = history.events!.find((e) => e.workflowTaskCompletedEventAttributes)!;
  await temporalCli(
    'workflow',
    'reset',
    '-w',
    `prediction-${created.body.id}`,
    '--event-id',
    String(firstTaskCompleted.eventId),
    '--reason',
    'from a chosen event',
  );
  // The new run writes `starting`, then its own end, with a later completed_at.
  const again = await poll(
    () => get(me.token, created.body.id),
    (r) => r.body.status === 'succeeded' && r.body.completed_at !== first.completed_at,
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  expect(again.body.output).toEqual(first.output);
  await expectSlotFree(me.token);
  expect(await usageRows(created.body.id)).toHaveLength(1);
});

test('cancel from the client: canceled with the output so far, stream done, completed webhook, slot free, usage once', async () => {
  const me = await oneAtATime('op-cancel');
  const p = await longPrediction(me.token);
  await handle(p.id).cancel();
  const canceled = await ended(me.token, p.id, 45_000);
  expect(canceled.status).toBe('canceled');
  const { events } = await readSse(p.urls.stream, { until: (e) => e.event === 'done' });
  expect(JSON.parse(events[events.length - 1].data)).toEqual({ reason: 'canceled' });
  await poll(
    async () => completedHooks(p.id).map((h) => h.json.status),
    (s) => s.includes('canceled'),
    { timeoutMs: 30_000 },
  );
  await expectSlotFree(me.token);
  expect(await usageRows(p.id)).toHaveLength(1);
});

test('a stray signal from an operator (a second start signal) changes nothing: the prediction ends as it would have', async () => {
  const me = await oneAtATime('op-signal');
  const p = await longPrediction(me.token, 200);
  const startedAt = (await get(me.token, p.id)).body.started_at;
  await handle(p.id).signal('predictionStarted', { startedAt: '2000-01-01T00:00:00.000Z', nodeId: 'operator' });
  const done = await ended(me.token, p.id, 60_000);
  expect(done.status).toBe('succeeded');
  expect(done.started_at).toBe(startedAt);
  await expectSlotFree(me.token);
  expect(await usageRows(p.id)).toHaveLength(1);
});

test('reset a running batch to its last workflow task: it carries on from what its history holds and ends with every item once, its slot free', async () => {
  const me = await newAccount(db, 'op-batch-reset');
  // 300 ms an item, 2 a chunk, 2 chunks at a time: about two seconds of work left when it is reset.
  const inputs = Array.from({ length: 14 }, (_, i) => ({ text: `item ${i}`, sleep_ms: 300 }));
  const created = await api('/v1/batches', { token: me.token, body: { version: 'kiln/echo-fixture', inputs, chunk_size: 2 } });
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  const getBatch = () => api(`/v1/batches/${id}`, { token: me.token });
  await poll(getBatch, (r) => r.body.completed >= 4, { timeoutMs: 60_000, intervalMs: 100 });
  // Work is left: the reset run has chunks to run, after the ones its history says are done.
  expect((await getBatch()).body.completed).toBeLessThan(12);
  const batchHandle = temporal.client.workflow.getHandle(`batch-${id}`);
  const oldRun = (await batchHandle.describe()).runId;
  await temporalCli('workflow', 'reset', '-w', `batch-${id}`, '--type', 'LastWorkflowTask', '--reason', 'operator reset of a batch');
  expect((await batchHandle.describe()).runId).not.toBe(oldRun);

  const done = (
    await poll(getBatch, (r) => ['succeeded', 'failed', 'canceled'].includes(r.body.status), { timeoutMs: 120_000, intervalMs: 200 })
  ).body;
  expect(done.status).toBe('succeeded');
  expect(done.completed).toBe(14);
  expect(done.failed).toBe(0);
  const res = await fetch(done.output_file.urls.get);
  const lines = (await res.text())
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as { index: number });
  expect(lines.map((l) => l.index)).toEqual(inputs.map((_, i) => i));
  await poll(
    () => load(me.token),
    (c) => c.admitted === 0,
    { timeoutMs: 30_000 },
  );
});

test('reset a batch while it waits to retry a failed chunk: the new run resumes that chunk from its last checkpoint, not from its first item', async () => {
  const me = await newAccount(db, 'op-batch-ckpt');
  // A second attempt 8 s after the first fails: time to reset the workflow while it waits.
  const version = (await echoFixtureVersion(me.token, me.account.username, 'ckpt', { retry: { max_attempts: 2, initial_interval_s: 8 } }))
    .id;
  // Item 1 fails its first attempt: the chunk's checkpoint then holds item 0's line.
  const inputs = [{ text: 'zero' }, { text: 'one', fail_attempts: 1 }, { text: 'two' }];
  const created = await api('/v1/batches', { token: me.token, body: { version, inputs, chunk_size: 3 } });
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  const getBatch = () => api(`/v1/batches/${id}`, { token: me.token });
  await poll(getBatch, (r) => /resuming from item 1 \(1 of 3 done\) in 8 s/.test(r.body.logs), { timeoutMs: 60_000, intervalMs: 100 });
  const batchHandle = temporal.client.workflow.getHandle(`batch-${id}`);
  const oldRun = (await batchHandle.describe()).runId;
  await temporalCli(
    'workflow',
    'reset',
    '-w',
    `batch-${id}`,
    '--type',
    'LastWorkflowTask',
    '--reason',
    'operator reset of a waiting batch',
  );
  const newRun = (await batchHandle.describe()).runId;
  expect(newRun).not.toBe(oldRun);

  const done = (
    await poll(getBatch, (r) => ['succeeded', 'failed', 'canceled'].includes(r.body.status), { timeoutMs: 60_000, intervalMs: 200 })
  ).body;
  expect(done).toMatchObject({ status: 'succeeded', completed: 3, failed: 0 });
  const lines = (await (await fetch(done.output_file.urls.get)).text())
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l));
  expect(lines).toEqual([
    { index: 0, output: 'zero' },
    { index: 1, output: 'one' },
    { index: 2, output: 'two' },
  ]);
  // The new run's attempt of the chunk was handed the old run's checkpoint: item 0 done.
  const history = await temporal.client.workflow.getHandle(`batch-${id}`, newRun).fetchHistory();
  const chunkRequests = (history.events ?? [])
    .map((e) => e.activityTaskScheduledEventAttributes)
    .filter((a) => a?.activityType?.name === 'runBatchChunk')
    .map((a) => defaultPayloadConverter.fromPayload<BatchChunkRequest>(a!.input!.payloads![0]));
  expect(chunkRequests.map((r) => r.resume?.lines.length ?? 0)).toEqual([0, 1]);
  expect(JSON.parse(chunkRequests[1].resume!.lines[0])).toEqual({ index: 0, output: 'zero' });
  await poll(
    () => load(me.token),
    (c) => c.admitted === 0,
    { timeoutMs: 30_000 },
  );
});
