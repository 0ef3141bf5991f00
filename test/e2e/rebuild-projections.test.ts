/**
 * Projections are rebuildable from Temporal: lose and corrupt rows, rebuild, get the same rows.
 * The rebuild upserts by revision, so a row whose workflow Temporal does not know (its history is
 * past retention) is kept as it is; batches are rebuilt too.
 */
import { asc, eq, inArray } from 'drizzle-orm';
import { archivedThrough } from '../../activities/history-archive';
import { closeDb, type Db } from '../../db/client';
import { batches, predictions } from '../../db/schema';
import { config } from '../../lib/config';
import { newId } from '../../lib/ids';
import { Storage } from '../../lib/storage';
import { pacedLlama } from '../fixtures/models';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { runCli } from '../processes';
import { testTemporal } from '../temporal';

jest.setTimeout(300_000);

let db: Db;
beforeAll(() => {
  db = testDb();
});
afterAll(() => closeDb(db));

test('npm run admin -- rebuild-projections rebuilds rows equal to the originals', async () => {
  const { token, account } = await newAccount(db, 'rebuild');
  const ids: string[] = [];
  const create = async (route: string, input: Record<string, unknown>) => ids.push((await api(route, { token, body: { input } })).body.id);
  await create('/v1/models/kiln/tiny-llama/predictions', { prompt: 'one', max_tokens: 5, seed: 1 });
  await create('/v1/models/kiln/tiny-llama/predictions', { prompt: 'two', max_tokens: 9, seed: 2 });
  await create('/v1/models/kiln/echo-fixture/predictions', { text: 'three' });
  await create('/v1/models/kiln/remove-background/predictions', {
    image: `data:image/png;base64,${Buffer.from('nope').toString('base64')}`,
  });
  // 2000 paced tokens last 40 s or more on any machine: the cancel lands mid-generation.
  await pacedLlama(db);
  const long = (
    await api('/v1/models/kiln-test/paced-llama/predictions', {
      token,
      body: { input: { prompt: 'stop', max_tokens: 2000, min_tokens: 2000 } },
    })
  ).body.id;
  ids.push(long);
  await poll(
    () => api(`/v1/predictions/${long}`, { token }),
    (r) => r.body.status === 'processing',
  );
  await api(`/v1/predictions/${long}/cancel`, { token, method: 'POST' });
  for (const id of ids)
    await poll(
      () => api(`/v1/predictions/${id}`, { token }),
      (r) => TERMINAL.includes(r.body.status),
      { timeoutMs: 60_000 },
    );

  const rows = () => db.select().from(predictions).where(eq(predictions.accountId, account.id)).orderBy(asc(predictions.id));
  const before = await rows();
  expect(before.map((r) => r.status).sort()).toEqual(['canceled', 'failed', 'succeeded', 'succeeded', 'succeeded']);

  // Lose two rows and corrupt a third: only Temporal can say what they were.
  const [lost1, lost2, corrupted] = before.filter((r) => r.status === 'succeeded' || r.status === 'canceled').slice(0, 3);
  await db.delete(predictions).where(inArray(predictions.id, [lost1.id, lost2.id]));
  await db
    .update(predictions)
    .set({ status: 'failed', output: null, error: 'corrupted by the test', logs: '' })
    .where(eq(predictions.id, corrupted.id));
  expect((await rows()).length).toBe(before.length - 2);

  // A prediction whose workflow history is gone (here: never was): nothing in Temporal says what it
  // was, so the rebuild must keep it.
  const orphan = {
    ...before[0],
    id: newId(),
    runId: null,
    output: 'kept from before retention',
    createdAt: new Date('2020-01-01T00:00:00Z'),
  };
  await db.insert(predictions).values(orphan);
  // A batch, lost: rebuilt from its workflow (its runs continued as new every 4 chunks).
  const batch = (
    await api('/v1/batches', {
      token,
      body: { version: 'kiln/echo-fixture', inputs: Array.from({ length: 10 }, (_, i) => ({ text: `b${i}` })), chunk_size: 2 },
    })
  ).body;
  await poll(
    () => api(`/v1/batches/${batch.id}`, { token }),
    (r) => r.body.status === 'succeeded',
    { timeoutMs: 120_000, intervalMs: 200 },
  );
  const [batchBefore] = await db.select().from(batches).where(eq(batches.id, batch.id));
  await db.delete(batches).where(eq(batches.id, batch.id));

  const { stdout } = await runCli('cli/admin.ts', ['rebuild-projections']);
  // Every prediction of the suite's namespace, this test's five among them.
  expect(Number(/rebuilt (\d+) predictions from Temporal/.exec(stdout)?.[1])).toBeGreaterThanOrEqual(before.length);
  expect(Number(/rebuilt (\d+) batches from Temporal/.exec(stdout)?.[1])).toBeGreaterThanOrEqual(1);
  const after = await rows();
  expect(after.filter((r) => r.id !== orphan.id)).toEqual(before);
  expect(after.find((r) => r.id === orphan.id)).toEqual(orphan);
  const [batchAfter] = await db.select().from(batches).where(eq(batches.id, batch.id));
  expect(batchAfter).toEqual(batchBefore);
});

test('a prediction whose history Temporal no longer has (deleted, as retention does) is rebuilt from Kiln’s archive of closed histories', async () => {
  const { token } = await newAccount(db, 'rebuild-archive');
  const id = (await api('/v1/models/kiln/echo-fixture/predictions', { token, body: { input: { text: 'archived' } } })).body.id as string;
  await poll(
    () => api(`/v1/predictions/${id}`, { token }),
    (r) => r.body.status === 'succeeded',
    { timeoutMs: 60_000 },
  );
  const row = async () => (await db.select().from(predictions).where(eq(predictions.id, id)))[0];
  const original = await row();

  const temporal = await testTemporal();
  try {
    const workflowId = `prediction-${id}`;
    const { runId, closeTime } = await temporal.client.workflow.getHandle(workflowId).describe();
    // The reconciler copies closed histories to the bucket (the dev server cannot archive); its mark passes the run's close.
    const storage = Storage.fromConfig(config());
    await poll(
      () => archivedThrough(storage),
      (through) => (through?.getTime() ?? 0) >= closeTime!.getTime(),
      { timeoutMs: 180_000, intervalMs: 500 },
    );
    // What retention does: the history goes from Temporal.
    await temporal.client.workflowService.deleteWorkflowExecution({
      namespace: temporal.client.options.namespace,
      workflowExecution: { workflowId, runId },
    });
    const known = () =>
      temporal.client.workflow
        .getHandle(workflowId)
        .describe()
        .then(
          () => true,
          () => false,
        );
    await poll(known, (has) => !has, { timeoutMs: 60_000, intervalMs: 500 });
  } finally {
    await temporal.close();
  }
  await db
    .update(predictions)
    .set({ status: 'failed', output: null, error: 'corrupted by the test', logs: '' })
    .where(eq(predictions.id, id));

  const admin = (...args: string[]) => runCli('cli/admin.ts', args);
  const { stdout } = await admin('rebuild-projections');
  expect(Number(/rebuilt (\d+) rows from archived histories/.exec(stdout)?.[1])).toBeGreaterThanOrEqual(1);
  expect(await row()).toEqual(original);

  // An operator reads the archived history as `temporal workflow show --output json` prints it.
  const shown = JSON.parse((await admin('archived-history', `prediction-${id}`)).stdout) as { events: Array<Record<string, any>> };
  expect(shown.events[0].eventType).toBe('EVENT_TYPE_WORKFLOW_EXECUTION_STARTED');
  expect(shown.events[0].workflowExecutionStartedEventAttributes.workflowType.name).toBe('predictionWorkflow');
  expect(shown.events.at(-1)!.eventType).toBe('EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED');
});
