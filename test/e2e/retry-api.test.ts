/**
 * POST /v1/predictions/{id}/retry: a failed prediction runs again as a new run of its workflow
 * (`prediction-<id>`), keeping its id; Temporal keeps both runs, the old one's end included; the
 * API, the completed webhook, the account's slot and its usage (each run metered once) follow
 * the new run. Anything not failed,
 * canceled or aborted is a 409; a bad body a 422 naming the field.
 *
 * The failures are the echo fixture's `fail_attempts` on versions with `max_attempts: 1`: the
 * first attempt fails the prediction, and the fixture counts attempts per prediction, so the
 * retry's attempt (the second) succeeds.
 */
import type { Client } from '@temporalio/client';
import { eq } from 'drizzle-orm';
import { updateAccount } from '../../db/accounts';
import { closeDb, type Db } from '../../db/client';
import { usageRecords } from '../../db/schema';
import { echoFixtureVersion } from '../fixtures/echo-versions';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { type Receiver, startReceiver } from '../receiver';
import { testTemporal } from '../temporal';

jest.setTimeout(180_000);

let db: Db;
let temporal: { client: Client; close: () => Promise<void> };
let receiver: Receiver;
let token: string;
let owner: string;
let v1: string;
let v2: string;

beforeAll(async () => {
  db = testDb();
  temporal = await testTemporal();
  receiver = await startReceiver();
  const a = await newAccount(db, 'retryapi');
  // One running prediction at a time: a slot the retry kept shows at once.
  await updateAccount(db, a.account.id, { maxRunning: 1 });
  token = a.token;
  owner = a.account.username;
  v1 = await echoVersion('first');
  v2 = await echoVersion('second');
});
afterAll(async () => {
  await receiver.close();
  await temporal.close();
  await closeDb(db);
});

/** A version of the caller's echo-fixture model `flaky` that gives a failing prediction no second attempt. */
const echoVersion = async (label: string) => (await echoFixtureVersion(token, owner, 'flaky', { label, retry: { max_attempts: 1 } })).id;

const get = (id: string) => api(`/v1/predictions/${id}`, { token });
const ended = (id: string) =>
  poll(
    () => get(id),
    (r) => TERMINAL.includes(r.body.status),
    { timeoutMs: 60_000, intervalMs: 100 },
  ).then((r) => r.body);
const retry = (id: string, body: unknown = {}) => api(`/v1/predictions/${id}/retry`, { token, body });
const load = () => api('/v1/account', { token }).then((r) => r.body.current as { admitted: number; queued: number });

/** A prediction of version `v1` whose only attempt fails, with a completed webhook, seen failed. */
async function failedPrediction(text: string) {
  const created = await api('/v1/predictions', {
    token,
    body: { version: v1, input: { text, fail_attempts: 1 }, webhook: receiver.url, webhook_events_filter: ['completed'] },
  });
  expect(created.status).toBe(201);
  const failed = await ended(created.body.id);
  expect(failed.status).toBe('failed');
  expect(failed.error).toMatch(/injected fault on attempt 1/);
  return failed as { id: string; workflow_id: string; run_id: string };
}

/** Every run of the workflow Temporal lists (visibility trails by a moment), oldest first. */
async function runsOf(workflowId: string, count: number) {
  const list = async () => {
    const runs = [];
    for await (const w of temporal.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) runs.push(w);
    return runs.sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
  };
  return poll(list, (runs) => runs.length >= count && runs.every((r) => r.status.name !== 'RUNNING'), {
    timeoutMs: 30_000,
    intervalMs: 250,
  });
}

test('a failed prediction retried runs again as a new run of its workflow and succeeds; both runs stay in Temporal', async () => {
  const failed = await failedPrediction('second time lucky');
  expect(failed.run_id).toEqual(expect.any(String));
  expect(failed).toMatchObject({ retries: 0 });
  await poll(load, (c) => c.admitted === 0);

  const retried = await retry(failed.id);
  expect(retried.status).toBe(201);
  expect(retried.body).toMatchObject({
    id: failed.id,
    status: 'starting',
    version: v1,
    workflow_id: failed.workflow_id,
    output: null,
    error: null,
  });
  expect(retried.body.run_id).toEqual(expect.any(String));
  expect(retried.body.run_id).not.toBe(failed.run_id);

  const done = await ended(failed.id);
  expect(done).toMatchObject({
    status: 'succeeded',
    output: 'second time lucky',
    error: null,
    run_id: retried.body.run_id,
    retries: 1,
    input: { text: 'second time lucky', fail_attempts: 1 },
  });

  // Both runs in Temporal: the first failed prediction's run, then the retry's, one workflow id.
  const runs = await runsOf(failed.workflow_id, 2);
  expect(runs.map((r) => r.runId)).toEqual([failed.run_id, retried.body.run_id]);
  // The old run's end stays readable in its own history.
  const oldHistory = await temporal.client.workflow.getHandle(failed.workflow_id, failed.run_id).fetchHistory();
  const oldEvents = JSON.stringify(oldHistory.events);
  expect(oldEvents).toMatch(/injected fault on attempt 1/);
  expect((await temporal.client.workflow.getHandle(failed.workflow_id).describe()).runId).toBe(retried.body.run_id);

  // Webhooks follow the new run as a create's do: a completed one says succeeded.
  await poll(
    async () => receiver.accepted.filter((h) => h.json?.id === failed.id).map((h) => h.json?.status),
    (statuses) => statuses.includes('succeeded'),
  );
  // The slot the retry took is given back: the account (max_running 1) is idle again.
  await poll(load, (c) => c.admitted === 0);

  // Each run that the API started is metered: the failed first run and the retry's, once each.
  const usage = await poll(
    () => db.select().from(usageRecords).where(eq(usageRecords.predictionId, failed.id)),
    (rows) => rows.length >= 2,
  );
  expect(usage.map((u) => [u.retries, u.status]).sort()).toEqual([
    [0, 'failed'],
    [1, 'succeeded'],
  ]);
  // The account's usage counts both (this is its first prediction).
  const summary = await api('/v1/account/usage', { token });
  expect(summary.body.results.reduce((n: number, r: { predictions: number }) => n + r.predictions, 0)).toBe(2);
});

test('a retry may name another version: the prediction runs on it, with the same input', async () => {
  const failed = await failedPrediction('on the new version');
  await poll(load, (c) => c.admitted === 0);
  // Prefer: wait holds the answer until the new run ends, as on a create.
  const retried = await api(`/v1/predictions/${failed.id}/retry`, {
    token,
    body: { version: `${owner}/flaky:${v2}` },
    headers: { prefer: 'wait=30' },
  });
  expect(retried.status).toBe(201);
  expect(retried.body).toMatchObject({ status: 'succeeded', version: v2, output: 'on the new version' });
  expect((await get(failed.id)).body).toMatchObject({ status: 'succeeded', version: v2, run_id: retried.body.run_id });
  await poll(load, (c) => c.admitted === 0);
});

test('a succeeded or running prediction is a 409; a retry of a retry already running too', async () => {
  const ok = await api('/v1/predictions', { token, body: { version: v1, input: { text: 'fine' } }, headers: { prefer: 'wait=30' } });
  expect(ok.body.status).toBe('succeeded');
  const conflict = await retry(ok.body.id);
  expect(conflict.status).toBe(409);
  expect(conflict.body.detail).toMatch(/is succeeded; only a failed, canceled, aborted prediction can be retried/);
  expect((await get(ok.body.id)).body).toMatchObject({ status: 'succeeded', output: 'fine' });

  const failed = await failedPrediction('retried twice');
  const running = await retry(failed.id);
  expect(running.status).toBe(201);
  const again = await retry(failed.id);
  // The first retry may have finished already; then it succeeded, which is a 409 too.
  expect(again.status).toBe(409);
  expect(again.body.detail).toMatch(/is (starting|processing|succeeded)/);
  expect((await ended(failed.id)).status).toBe('succeeded');
  await runsOf(failed.workflow_id, 2).then((runs) => expect(runs).toHaveLength(2));
});

test('a bad body is a 422 naming the field; an unknown id a 404', async () => {
  const failed = await failedPrediction('stays failed');
  const wrongType = await retry(failed.id, { version: 5 });
  expect(wrongType.status).toBe(422);
  expect(wrongType.body.invalid_fields.map((f: { field: string }) => f.field)).toContain('version');
  const unknownField = await retry(failed.id, { input: { text: 'other' } });
  expect(unknownField.status).toBe(422);
  expect(JSON.stringify(unknownField.body.invalid_fields)).toMatch(/input/);
  const noSuchVersion = await retry(failed.id, { version: `${owner}/no-such-model` });
  expect(noSuchVersion.status).toBe(422);
  expect(noSuchVersion.body.invalid_fields[0].field).toBe('version');
  // None of these started anything: still failed, one run, no slot held.
  expect((await get(failed.id)).body.status).toBe('failed');
  expect(await runsOf(failed.workflow_id, 1)).toHaveLength(1);
  expect((await load()).admitted).toBe(0);

  const missing = await retry('no-such-prediction');
  expect(missing.status).toBe(404);
});
