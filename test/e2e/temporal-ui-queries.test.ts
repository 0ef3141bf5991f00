/**
 * The Temporal UI / CLI list filters the README gives operators find what they say, through the
 * search attributes predictions carry (KilnStatus, KilnModel, KilnAccount): run here with
 * `temporal workflow list --query` against the suite's own namespace.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { closeDb, type Db } from '../../db/client';
import { api, newAccount, poll, testDb } from '../helpers';

jest.setTimeout(120_000);
const exec = promisify(execFile);

let db: Db;
let token: string;
let username: string;
beforeAll(async () => {
  db = testDb();
  const created = await newAccount(db, 'ops');
  token = created.token;
  username = created.account.username;
});
afterAll(() => closeDb(db));

/** Workflow ids `temporal workflow list --query` returns, as an operator runs it. */
async function listWorkflows(query: string): Promise<string[]> {
  const { stdout } = await exec(process.env.TEMPORAL_BIN!, [
    'workflow',
    'list',
    '--address',
    process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233',
    '--namespace',
    process.env.TEMPORAL_NAMESPACE!,
    '--query',
    query,
    '--output',
    'jsonl',
  ]);
  return stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => (JSON.parse(line) as { execution: { workflowId: string } }).execution.workflowId);
}

test("the README's queries: one model's failed predictions in the last hour, one account's running work", async () => {
  const failed = await api('/v1/models/kiln/echo-fixture/predictions', {
    token,
    body: { input: { error: 'refused for the test' } },
    headers: { prefer: 'wait=30' },
  });
  expect(failed.body.status).toBe('failed');
  const running = await api('/v1/models/kiln/echo-fixture/predictions', { token, body: { input: { sleep_ms: 60_000 } } });
  await poll(
    () => api(`/v1/predictions/${running.body.id}`, { token }),
    (r) => r.body.status === 'processing',
  );
  try {
    const hourAgo = new Date(Date.now() - 3600_000).toISOString();
    const failedOfModel = `WorkflowType = 'predictionWorkflow' AND KilnModel = 'kiln/echo-fixture' AND KilnStatus = 'failed' AND CloseTime > '${hourAgo}'`;
    const runningOfAccount = `KilnAccount = '${username}' AND ExecutionStatus = 'Running'`;
    // Visibility trails the workflows by a moment.
    const found = await poll(
      async () => ({ failed: await listWorkflows(failedOfModel), running: await listWorkflows(runningOfAccount) }),
      (r) => r.failed.includes(failed.body.workflow_id) && r.running.includes(running.body.workflow_id),
      { intervalMs: 500 },
    );
    expect(found.failed).not.toContain(running.body.workflow_id);
    expect(found.running).toEqual([running.body.workflow_id]);
  } finally {
    await api(`/v1/predictions/${running.body.id}/cancel`, { token, method: 'POST' });
  }
});
