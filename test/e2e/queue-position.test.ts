/**
 * Where a waiting prediction stands (`queue` on GET) and deadlines on the wait (max_queue_seconds),
 * on an echo-fixture version of its own with two slots, flooded by one account while another waits.
 */
import { eq } from 'drizzle-orm';
import { updateAccount } from '../../db/accounts';
import { closeDb, type Db } from '../../db/client';
import { addVersion, upsertModel } from '../../db/models';
import { models } from '../../db/schema';
import { neverStartingModel } from '../fixtures/models';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { readSse } from '../sse';

jest.setTimeout(180_000);

let db: Db;
let flood: { token: string; account: { id: string; username: string } };
let quiet: { token: string };
let modelId: string;
let path: string;
const created: Array<{ id: string; token: string }> = [];

beforeAll(async () => {
  db = testDb();
  flood = await newAccount(db, 'queue-flood');
  quiet = await newAccount(db, 'queue-quiet');
  const model = await upsertModel(db, {
    ownerId: flood.account.id,
    owner: flood.account.username,
    name: 'queue-echo',
    task: 'echo-fixture',
    visibility: 'public',
  });
  modelId = model.id;
  await addVersion(db, model, { task: 'echo-fixture', engine: 'echo-fixture', files: [], memoryBytes: 1, settings: { sequences: 2 } });
  path = `/v1/models/${flood.account.username}/queue-echo/predictions`;
});

afterAll(async () => {
  // Nothing of this file may keep the fixture's slots busy for the next one.
  await Promise.all(created.map(({ id, token }) => api(`/v1/predictions/${id}/cancel`, { method: 'POST', token })));
  await Promise.all(created.map(({ id, token }) => finished(id, token)));
  await db.delete(models).where(eq(models.id, modelId));
  await closeDb(db);
});

async function create(token: string, sleepMs: number, extra: Record<string, unknown> = {}) {
  const r = await api(path, { token, body: { input: { text: 'q', sleep_ms: sleepMs }, ...extra } });
  if (r.status === 201) created.push({ id: r.body.id, token });
  return r;
}

const read = (id: string, token: string) => api(`/v1/predictions/${id}`, { token }).then((r) => r.body);
const finished = (id: string, token: string) =>
  poll(
    () => read(id, token),
    (p) => TERMINAL.includes(p.status),
    { timeoutMs: 90_000 },
  );

test('a waiting prediction shows its place in the fair queue, which falls until it starts', async () => {
  // Loads the version and gives it a measured service time.
  const warm = await create(flood.token, 1000);
  expect((await finished(warm.body.id, flood.token)).status).toBe('succeeded');

  const floodIds: string[] = [];
  for (let i = 0; i < 8; i++) floodIds.push((await create(flood.token, 2000)).body.id);
  await poll(
    () => Promise.all(floodIds.slice(0, 2).map((id) => read(id, flood.token))),
    (ps) => ps.every((p) => p.status !== 'starting'),
  );

  const mine = await create(quiet.token, 200);
  expect(mine.status).toBe(201);
  const first = await read(mine.body.id, quiet.token);
  expect(first.status).toBe('starting');
  // The flood has six waiting, yet fairness puts at most one of them (a tie that came first) ahead of it.
  expect(first.queue.position).toBeLessThanOrEqual(2);
  expect(first.queue.ahead).toBe(0);
  expect(first.queue.since).toBe(first.created_at);
  expect(first.queue.eta_seconds).toBeGreaterThanOrEqual(0);
  expect(first.queue.eta_seconds).toBeLessThan(10);

  // The flood's last one counts its own predictions ahead of it, and its stream says so too,
  // as `queue` events without an id (sent while something is ahead of it).
  const floodLast = await read(floodIds[7], flood.token);
  expect(floodLast.status).toBe('starting');
  expect(floodLast.queue.ahead).toBeGreaterThanOrEqual(1);
  expect(floodLast.queue.position).toBeGreaterThan(floodLast.queue.ahead);
  const streamed = await readSse(floodLast.urls.stream, { until: (e) => e.event === 'queue' || e.event === 'done' });
  const queued = streamed.events.find((e) => e.event === 'queue');
  expect(queued?.id).toBeUndefined();
  expect(JSON.parse(queued!.data)).toMatchObject({ position: expect.any(Number), ahead: expect.any(Number), since: floodLast.created_at });
  expect(JSON.parse(queued!.data).position).toBeGreaterThan(1);

  const positions: number[] = [first.queue.position];
  const started = await poll(
    async () => {
      const p = await read(mine.body.id, quiet.token);
      if (p.queue) positions.push(p.queue.position);
      return p;
    },
    (p) => p.status !== 'starting',
    { timeoutMs: 30_000 },
  );
  expect(started.queue).toBeUndefined();
  for (let i = 1; i < positions.length; i++) expect(positions[i]).toBeLessThanOrEqual(positions[i - 1]);
  expect((await finished(mine.body.id, quiet.token)).status).toBe('succeeded');
  await Promise.all(floodIds.map((id) => finished(id, flood.token)));
});

test('a create whose estimated wait is past max_queue_seconds is refused at once with the estimate', async () => {
  for (let i = 0; i < 10; i++) await create(flood.token, 2000);
  const refused = await poll(
    () => api(path, { token: quiet.token, body: { input: { text: 'q', sleep_ms: 0 }, max_queue_seconds: 1 } }),
    (r) => r.status !== 201,
    { timeoutMs: 10_000 },
  );
  expect(refused.status).toBe(503);
  expect(refused.body.detail).toMatch(/max_queue_seconds 1/);
  expect(refused.body.queue.eta_seconds).toBeGreaterThan(1);
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
});

test('a prediction not started within max_queue_seconds is aborted, and a bad Max-Queue-Time is a 422', async () => {
  const remove = await neverStartingModel(db, flood.account, 'never-starts');
  try {
    const r = await api(`/v1/models/${flood.account.username}/never-starts/predictions`, {
      token: flood.token,
      body: { input: { prompt: 'never' } },
      headers: { 'max-queue-time': '2s' },
    });
    expect(r.status).toBe(201);
    const done = await finished(r.body.id, flood.token);
    expect(done.status).toBe('aborted');
    expect(done.started_at).toBeNull();
    expect(done.logs).toMatch(/Aborted: not started by .* \(max_queue_seconds\)/);
    expect(Date.parse(done.completed_at) - Date.parse(done.created_at)).toBeGreaterThanOrEqual(2000);

    // The account's default applies where a request names none.
    await updateAccount(db, flood.account.id, { maxQueueSeconds: 2 });
    const account = await api('/v1/account', { token: flood.token });
    expect(account.body.limits.max_queue_seconds).toBe(2);
    const byDefault = await api(`/v1/models/${flood.account.username}/never-starts/predictions`, {
      token: flood.token,
      body: { input: { prompt: 'never either' } },
    });
    expect(byDefault.status).toBe(201);
    const defaulted = await finished(byDefault.body.id, flood.token);
    expect({ status: defaulted.status, started_at: defaulted.started_at }).toEqual({ status: 'aborted', started_at: null });
    expect(defaulted.logs).toMatch(/\(max_queue_seconds\)/);

    const bad = await api(path, { token: quiet.token, body: { input: { text: 'q' } }, headers: { 'max-queue-time': 'soon' } });
    expect(bad.status).toBe(422);
    expect(bad.body.invalid_fields[0].field).toBe('Max-Queue-Time');
  } finally {
    await updateAccount(db, flood.account.id, { maxQueueSeconds: null });
    await remove();
  }
});
