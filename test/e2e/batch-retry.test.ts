/**
 * POST /v1/batches/{id}/retry: an ended batch runs again, as a new run of its workflow
 * (`batch-<id>`), only the items that did not succeed: the items that failed, and those a failed
 * run never reached. Succeeded items keep their output lines as they were; the lines the retry
 * wrote carry its attempt. A running batch, or one that succeeded with no failed items, is a 409.
 *
 * The batch fails through the echo fixture's `fail_attempts` on a version with `max_attempts: 1`
 * (the chunk's only attempt fails, and so the batch); the fixture counts attempts per item, so
 * the retry's attempt of that item succeeds. An item with `error` fails for good, each time.
 * The suite runs with KILN_BATCH_CHUNKS_PER_RUN=4: both the first attempt and the retry
 * continue as new on the way.
 */
import type { Client } from '@temporalio/client';
import { closeDb, type Db } from '../../db/client';
import { batchWorkflowId } from '../../domain/batch-contracts';
import { echoFixtureVersion } from '../fixtures/echo-versions';
import { api, newAccount, poll, testDb } from '../helpers';
import { testTemporal } from '../temporal';

jest.setTimeout(180_000);

let db: Db;
let temporal: { client: Client; close: () => Promise<void> };
let token: string;
let version: string;

beforeAll(async () => {
  db = testDb();
  temporal = await testTemporal();
  const a = await newAccount(db, 'batchretry');
  token = a.token;
  version = (await echoFixtureVersion(token, a.account.username, 'flaky-batch', { retry: { max_attempts: 1 } })).id;
});
afterAll(async () => {
  await temporal.close();
  await closeDb(db);
});

interface Line {
  index: number;
  output?: string;
  error?: string;
  attempt?: number;
}

const ended = (id: string) =>
  poll(
    () => api(`/v1/batches/${id}`, { token }),
    (r) => ['succeeded', 'failed', 'canceled'].includes(r.body.status),
    { timeoutMs: 90_000, intervalMs: 200 },
  ).then((r) => r.body);

async function lines(batch: { output_file: { urls: { get: string } } }): Promise<Line[]> {
  const res = await fetch(batch.output_file.urls.get);
  expect(res.status).toBe(200);
  return (await res.text())
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Line);
}

test('a failed batch retried runs again only the items that failed or never ran; succeeded lines stay; both attempts in Temporal', async () => {
  const inputs: Array<Record<string, unknown>> = Array.from({ length: 12 }, (_, i) => ({ text: `item ${i}` }));
  inputs[1] = { text: 'refused', error: 'no thanks' };
  inputs[6] = { text: 'item 6', fail_attempts: 1 };
  const created = await api('/v1/batches', { token, body: { version, inputs, chunk_size: 1 } });
  expect(created.status).toBe(201);
  expect(created.body.attempt).toBe(1);
  const id = created.body.id as string;

  const failed = await ended(id);
  expect(failed.status).toBe('failed');
  expect(failed.error).toMatch(/Chunk 6 .*injected fault/);
  expect(failed.attempt).toBe(1);
  const before = await lines(failed);
  expect(before.find((l) => l.index === 1)).toEqual({ index: 1, error: 'ModelError: echo fixture: no thanks' });
  expect(before.some((l) => l.index === 6)).toBe(false);
  const succeededBefore = new Map(before.filter((l) => l.error === undefined).map((l) => [l.index, l]));

  const retried = await api(`/v1/batches/${id}/retry`, { token, body: {} });
  expect(retried.status).toBe(201);
  expect(retried.body).toMatchObject({ id, status: 'starting', attempt: 2, error: null, completed_at: null });
  expect(retried.body.run_id).toEqual(expect.any(String));
  expect(retried.body.run_id).not.toBe(failed.run_id);
  // Started already: a second retry now has nothing to do yet.
  const again = await api(`/v1/batches/${id}/retry`, { token, body: {} });
  expect(again.status).toBe(409);
  expect(again.body.detail).toMatch(/is (starting|processing)/);

  const done = await ended(id);
  expect(done).toMatchObject({ status: 'succeeded', attempt: 2, total: 12, completed: 11, failed: 1, error: null });
  expect(done.logs).toMatch(/Attempt 2: running the failed and unfinished items of \d+ of 12 chunks again/);
  const after = await lines(done);
  expect(after.map((l) => l.index)).toEqual([...Array(12).keys()]);
  for (const l of after) {
    // A line that succeeded before is the same line: its item did not run again.
    const kept = succeededBefore.get(l.index);
    if (kept) expect(l).toEqual(kept);
    else expect(l.attempt).toBe(2);
  }
  expect(after[1]).toEqual({ index: 1, error: 'ModelError: echo fixture: no thanks', attempt: 2 });
  expect(after[6]).toEqual({ index: 6, output: 'item 6', attempt: 2 });
  // Only the failed and the unreached items ran again: the first attempt's successes (0, 2–5 at least) did not.
  expect(after.filter((l) => l.attempt === 2).map((l) => l.index)).toEqual(
    after.filter((l) => !succeededBefore.has(l.index)).map((l) => l.index),
  );
  expect(succeededBefore.size).toBeGreaterThanOrEqual(5);

  // Every run stays in Temporal, one workflow id: the first attempt's (which failed) and the retry's.
  const workflowId = batchWorkflowId(id);
  await poll(
    async () => {
      const found = [];
      for await (const w of temporal.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) found.push(w);
      return found;
    },
    (found) =>
      found.some((w) => w.runId === failed.run_id) &&
      found.some((w) => w.runId === retried.body.run_id) &&
      found.every((w) => w.status.name !== 'RUNNING'),
    { timeoutMs: 30_000, intervalMs: 250 },
  );
  const oldHistory = JSON.stringify((await temporal.client.workflow.getHandle(workflowId, failed.run_id).fetchHistory()).events);
  expect(oldHistory).toMatch(/injected fault/);

  // Succeeded with a failed item: a retry runs that item again (it fails again, for good).
  const third = await api(`/v1/batches/${id}/retry`, { token, body: {} });
  expect(third.status).toBe(201);
  const thirdDone = await ended(id);
  expect(thirdDone).toMatchObject({ status: 'succeeded', attempt: 3, completed: 11, failed: 1 });
  const thirdLines = await lines(thirdDone);
  expect(thirdLines.filter((l) => l.attempt === 3).map((l) => l.index)).toEqual([1]);
});

test('a batch with nothing to retry is a 409 that says why; an unknown batch a 404', async () => {
  const created = await api('/v1/batches', { token, body: { version, inputs: [{ text: 'fine' }] } });
  const done = await ended(created.body.id);
  expect(done).toMatchObject({ status: 'succeeded', failed: 0 });
  const retried = await api(`/v1/batches/${created.body.id}/retry`, { token, body: {} });
  expect(retried.status).toBe(409);
  expect(retried.body).toMatchObject({ status: 409, detail: expect.stringMatching(/succeeded with no failed items/) });
  expect((await api(`/v1/batches/${done.id}`, { token })).body).toMatchObject({ status: 'succeeded', attempt: 1 });

  const missing = await api('/v1/batches/aaaaaaaaaaaaaaaaaaaaaaaaaa/retry', { token, body: {} });
  expect(missing.status).toBe(404);
});
