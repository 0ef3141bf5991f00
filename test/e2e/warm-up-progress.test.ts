/**
 * GET /v1/predictions/{id}/setup: a cold prediction's warm-up as Temporal's heartbeats report
 * it (what `kiln run` draws its progress bar from); null once the prediction has left `starting`.
 */
import { eq } from 'drizzle-orm';
import { progressFromHeartbeat } from '../../api/setup-progress';
import { closeDb, type Db } from '../../db/client';
import { models } from '../../db/schema';
import { ensureTestModel, TEST_LLAMA } from '../fixtures/models';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';

jest.setTimeout(120_000);

let db: Db;
let token: string;
let other: string;

beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'warmup')).token;
  other = (await newAccount(db, 'warmup-other')).token;
});
afterAll(() => closeDb(db));

test('heartbeat details map to a progress report', () => {
  expect(progressFromHeartbeat({ phase: 'download', file: 'model.gguf', bytes: 10, total: 100 }, 2)).toEqual({
    phase: 'download',
    file: 'model.gguf',
    bytes: 10,
    total: 100,
    attempt: 2,
  });
  expect(progressFromHeartbeat({ phase: 'load' })).toEqual({ phase: 'load' });
  expect(progressFromHeartbeat(undefined)).toEqual({ phase: 'queued' });
});

test('a cold prediction reports its warm-up while starting, and nothing after', async () => {
  // Fresh weights (a new seed): not in the node's cache, so this is a real download and load.
  // Each phase is held 2 s (a fixture setting), far longer than heartbeats take to reach
  // Temporal (500 ms at most): both phases are there to be seen on any machine.
  const version = await ensureTestModel(db, `warmup-${Date.now()}`, { ...TEST_LLAMA, seed: Date.now() % 100_000 }, { warmUpHoldMs: 2_000 });
  const model = await db.query.models.findFirst({ where: eq(models.id, version.modelId) });
  const created = await api(`/v1/models/${model!.owner}/${model!.name}/predictions`, {
    token,
    body: { input: { prompt: 'warm', max_tokens: 2 } },
  });
  expect(created.status).toBe(201);
  const id = created.body.id;

  const seen: any[] = [];
  await poll(
    async () => {
      const r = await api(`/v1/predictions/${id}/setup`, { token });
      expect(r.status).toBe(200);
      seen.push(r.body);
      return r.body;
    },
    (s) => s.phase === null,
    { timeoutMs: 60_000, intervalMs: 20 },
  );
  for (const s of seen) {
    expect([null, 'queued', 'download', 'load']).toContain(s.phase);
    if (s.phase !== null) expect(s.status).toBe('starting');
  }
  // The download was seen, with the file and its true size, then the load, in that order.
  const phases = seen.map((s) => s.phase);
  const downloads = seen.filter((s) => s.phase === 'download');
  expect(downloads.length).toBeGreaterThan(0);
  for (const d of downloads) {
    expect(d).toMatchObject({ file: 'model.gguf', total: version.files[0].size });
    expect(d.bytes).toBeLessThanOrEqual(d.total);
  }
  expect(downloads[downloads.length - 1].bytes).toBe(version.files[0].size);
  expect(phases).toContain('load');
  expect(phases.lastIndexOf('download')).toBeLessThan(phases.indexOf('load'));
  const done = await poll(
    () => api(`/v1/predictions/${id}`, { token }),
    (r) => TERMINAL.includes(r.body.status),
  );
  expect(done.body.status).toBe('succeeded');
  expect(done.body.metrics.setup_time).toBeGreaterThan(0);
  expect((await api(`/v1/predictions/${id}/setup`, { token })).body).toEqual({ phase: null, status: 'succeeded' });
  expect((await api(`/v1/predictions/${id}/setup`, { token: other })).status).toBe(404);
});
