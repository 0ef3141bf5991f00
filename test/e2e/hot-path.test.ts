/**
 * The hot path (issue 13): a warm prediction with no webhook costs two workflow tasks and no
 * local activity. The API wrote the first row and took the slot; the engine wrote `processing`
 * and the final row, released the slot and recorded usage.
 */
import type { temporal } from '@temporalio/proto';
import { eq } from 'drizzle-orm';
import { closeDb, type Db } from '../../db/client';
import { admissions, predictionEvents, predictions, usageRecords } from '../../db/schema';
import { predictionWorkflowId } from '../../domain/contracts';
import { pacedLlama } from '../fixtures/models';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { testTemporal } from '../temporal';

jest.setTimeout(120_000);

let db: Db;
let temporalClient: Awaited<ReturnType<typeof testTemporal>>;
beforeAll(async () => {
  db = testDb();
  temporalClient = await testTemporal();
});
afterAll(async () => {
  await temporalClient.close();
  await closeDb(db);
});

type Event = temporal.api.history.v1.IHistoryEvent;
async function history(id: string): Promise<Event[]> {
  return (await temporalClient.client.workflow.getHandle(predictionWorkflowId(id)).fetchHistory()).events ?? [];
}
const workflowTasks = (events: Event[]) => events.filter((e) => e.workflowTaskCompletedEventAttributes).length;
const localActivities = (events: Event[]) =>
  events.filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity').length;

/** The closed run's history. */
const closedHistory = (id: string) =>
  poll(
    () => history(id),
    (h) => h.some((e) => e.workflowExecutionCompletedEventAttributes),
  );

/**
 * Sends predictions until one is warm: the API reads the nodes serving a version at most once a
 * second, so the first after a cold start (the model placed and loaded by the workflow) or after
 * an engine restart may still go the long way.
 */
async function untilWarm(send: () => Promise<string>): Promise<void> {
  await poll(
    async () => localActivities(await closedHistory(await send())),
    (n) => n === 0,
    { timeoutMs: 30_000, intervalMs: 100 },
  );
}

/** What the engine left behind: the final row, no slot, one usage record, and a `done` event. */
async function leftBehind(id: string) {
  const [row] = await db.select().from(predictions).where(eq(predictions.id, id));
  const slots = await db.select().from(admissions).where(eq(admissions.predictionId, id));
  const usage = await db.select().from(usageRecords).where(eq(usageRecords.predictionId, id));
  const events = await db.select({ event: predictionEvents.event }).from(predictionEvents).where(eq(predictionEvents.predictionId, id));
  return { row, slots, usage, events: events.map((e) => e.event) };
}

test('a warm prediction with no webhook: two workflow tasks, no local activity, the engine writes the rest', async () => {
  const { token } = await newAccount(db, 'hot');
  const echo = (text: string) =>
    api('/v1/models/kiln/echo-fixture/predictions', { token, body: { input: { text } }, headers: { prefer: 'wait' } });
  await untilWarm(async () => {
    const warm = (await echo('warm up')).body;
    expect(warm.status).toBe('succeeded');
    return warm.id as string;
  });
  const p = (await echo('hot')).body;
  expect(p).toMatchObject({ status: 'succeeded', output: 'hot' });

  const events = await closedHistory(p.id);
  expect({ workflowTasks: workflowTasks(events), localActivities: localActivities(events) }).toEqual({
    workflowTasks: 2,
    localActivities: 0,
  });

  const left = await leftBehind(p.id);
  expect(left.row).toMatchObject({ status: 'succeeded', output: 'hot', revision: 2 });
  expect(left.slots).toHaveLength(0);
  expect(left.usage).toMatchObject([{ status: 'succeeded', hardware: 'fixture' }]);
  expect(left.events.filter((e) => e === 'done')).toHaveLength(1);
  // The workflow's own result is the very row the engine wrote: projections rebuild from it.
  const result = await temporalClient.client.workflow.getHandle(predictionWorkflowId(p.id)).result();
  expect(result).toMatchObject({ status: 'succeeded', revision: 2, completedAt: left.row.completedAt!.toISOString(), logs: left.row.logs });
});

test('a longer one shows processing, written by the engine, and still takes two workflow tasks', async () => {
  const { token } = await newAccount(db, 'hot-long');
  await pacedLlama(db);
  const create = (max: number) =>
    api('/v1/models/kiln-test/paced-llama/predictions', { token, body: { input: { prompt: 'slow', max_tokens: max, min_tokens: max } } });
  await untilWarm(async () => {
    const warm = (await create(2)).body.id as string;
    await poll(
      () => api(`/v1/predictions/${warm}`, { token }),
      (r) => TERMINAL.includes(r.body.status),
    );
    return warm;
  });
  const p = (await create(60)).body;
  const seen = await poll(
    () => api(`/v1/predictions/${p.id}`, { token }),
    (r) => r.body.status !== 'starting',
  );
  expect(seen.body.status).toBe('processing');
  expect(seen.body.started_at).toBeTruthy();
  const done = await poll(
    () => api(`/v1/predictions/${p.id}`, { token }),
    (r) => TERMINAL.includes(r.body.status),
  );
  expect(done.body.status).toBe('succeeded');
  const events = await closedHistory(p.id);
  expect({ workflowTasks: workflowTasks(events), localActivities: localActivities(events) }).toEqual({
    workflowTasks: 2,
    localActivities: 0,
  });
  expect((await leftBehind(p.id)).slots).toHaveLength(0);
});

test('a prediction with a webhook goes the long way: the workflow admits and projects it', async () => {
  const { token } = await newAccount(db, 'hot-hook');
  // Nothing listens there: only the path is looked at, not the delivery.
  const p = (
    await api('/v1/models/kiln/echo-fixture/predictions', {
      token,
      body: { input: { text: 'hooked' }, webhook: 'http://127.0.0.1:9/hook', webhook_events_filter: ['completed'] },
      headers: { prefer: 'wait' },
    })
  ).body;
  expect(p.status).toBe('succeeded');
  const events = await poll(
    () => history(p.id),
    (h) => h.some((e) => e.workflowExecutionCompletedEventAttributes),
  );
  expect(localActivities(events)).toBeGreaterThanOrEqual(2);
  expect((await leftBehind(p.id)).slots).toHaveLength(0);
});
