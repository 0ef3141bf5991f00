/**
 * The suite's stack runs under infra/supervisor.ts, as npm start's does. kill -9 of each of
 * Kiln's processes in turn (API, control worker, engine worker) while a prediction runs: the
 * supervisor starts a new one, logs the restart, npm run status counts it, and the prediction
 * succeeds with its output, with no step from the test but the kill.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { closeDb, type Db } from '../../db/client';
import { stackStatus } from '../../infra/status';
import { killSuiteProcess } from '../chaos';
import { API_URL, newAccount, poll, TERMINAL, testDb } from '../helpers';

jest.setTimeout(600_000);

const RUN_DIR = process.env.KILN_RUN_DIR ?? path.resolve(__dirname, '../../.data/test');
let db: Db;

beforeAll(() => {
  db = testDb();
});
afterAll(() => closeDb(db));

/** A read that rides out the API's own restart: anything but a 200 counts as "not yet". */
async function readPrediction(token: string, id: string) {
  try {
    const res = await fetch(`${API_URL}/v1/predictions/${id}`, { headers: { authorization: `Bearer ${token}` } });
    return res.status === 200 ? ((await res.json()) as any) : { status: `http ${res.status}` };
  } catch (err) {
    return { status: `unreachable: ${(err as Error).message}` };
  }
}

async function createEcho(token: string, text: string) {
  const res = await fetch(`${API_URL}/v1/models/kiln/echo-fixture/predictions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ input: { text, sleep_ms: 5_000 } }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as any;
}

test.each(['api', 'control-worker', 'engine-worker'])(
  'kill -9 of the %s while a prediction runs: restarted by the supervisor, the prediction succeeds',
  async (name) => {
    const { token } = await newAccount(db, `supervised-${name}`);
    const text = `survives a killed ${name}`;
    const created = await createEcho(token, text);
    // Running on the engine (the echo sleeps 5 s), so the kill lands in the middle of it.
    await poll(
      () => readPrediction(token, created.id),
      (p) => p.status === 'processing',
      { timeoutMs: 120_000, intervalMs: 100 },
    );
    const before = (await stackStatus()).find((c) => c.component === `${path.basename(RUN_DIR)}:${name}`);

    const killedAt = Date.now();
    const { killed, restarted, downMs } = await killSuiteProcess(name);
    console.log(`${name}: pid ${killed} killed, pid ${restarted} ready ${downMs} ms later`);

    const done = await poll(
      () => readPrediction(token, created.id),
      (p) => TERMINAL.includes(p.status),
      { timeoutMs: 240_000, intervalMs: 250 },
    );
    expect({ status: done.status, output: done.output, error: done.error }).toEqual({ status: 'succeeded', output: text, error: null });
    console.log(`${name}: the prediction ended ${Date.parse(done.completed_at) - killedAt} ms after the kill`);
    // The lost attempt fails by whichever comes first: the restarted engine's report of what its
    // predecessor left running, or the 2 s heartbeat timeout (a restart here takes seconds).
    if (name === 'engine-worker')
      expect(done.logs).toMatch(
        /Attempt 1 failed on node .*: (EngineInterrupted: .*stopped while it ran \(reported by its restart\)|activity Heartbeat timeout)/,
      );

    const log = readFileSync(path.join(RUN_DIR, 'logs/supervisor.log'), 'utf8');
    expect(log).toContain(`${name} (pid ${killed}) exited (SIGKILL)`);
    const after = (await stackStatus()).find((c) => c.component === `${path.basename(RUN_DIR)}:${name}`);
    expect(after).toMatchObject({ up: true, pid: restarted, restarts: (before?.restarts ?? 0) + 1 });
  },
);
