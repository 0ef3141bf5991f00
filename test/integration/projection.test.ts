/** The projection repository against the real Postgres: ordering, events, and hostile output. */
import { closeDb, type Db } from '../../db/client';
import { eventsAfter } from '../../db/events';
import { getPrediction, writePredictionSnapshot, type PredictionSnapshot } from '../../db/predictions';
import { newId } from '../../lib/ids';
import { newAccount, testDb } from '../helpers';

let db: Db;
let accountId: string;
beforeAll(async () => {
  db = testDb();
  accountId = (await newAccount(db, 'proj')).account.id;
});
afterAll(() => closeDb(db));

const snapshot = (over: Partial<PredictionSnapshot>): PredictionSnapshot => ({
  id: newId(),
  accountId,
  model: 'kiln/tiny-llama',
  versionId: 'v',
  input: { prompt: 'x' },
  output: null,
  logs: '',
  error: null,
  status: 'starting',
  metrics: {},
  createdAt: new Date().toISOString(),
  startedAt: null,
  completedAt: null,
  revision: 1,
  ...over,
});

test('an older revision never overwrites a newer one', async () => {
  const s = snapshot({ revision: 2, status: 'processing' });
  expect(await writePredictionSnapshot(db, s)).toBe(true);
  expect(await writePredictionSnapshot(db, { ...s, revision: 1, status: 'starting' })).toBe(false);
  expect((await getPrediction(db, accountId, s.id))!.status).toBe('processing');
  expect(await writePredictionSnapshot(db, { ...s, revision: 3, status: 'succeeded', output: ['a'] })).toBe(true);
  expect((await getPrediction(db, accountId, s.id))!.status).toBe('succeeded');
});

test('new log lines, output and done go to the stream once, even when a write is repeated', async () => {
  const s = snapshot({ logs: 'one\n' });
  await writePredictionSnapshot(db, s);
  const done = { ...s, logs: 'one\ntwo\n', status: 'succeeded' as const, output: ['hi', '!'], revision: 2 };
  await writePredictionSnapshot(db, done);
  await writePredictionSnapshot(db, done);
  const events = (await eventsAfter(db, s.id, 0)).map((e) => [e.event, e.data]);
  expect(events).toEqual([
    ['logs', 'one'],
    ['logs', 'two'],
    ['output', '["hi","!"]'],
    ['done', '{}'],
  ]);
});

test('the same revision written again (a re-run workflow task) takes the new values and adds no event', async () => {
  const s = snapshot({});
  const first = { ...s, status: 'succeeded' as const, output: ['x'], completedAt: '2026-01-01T00:00:00.600Z', revision: 2 };
  await writePredictionSnapshot(db, first);
  expect(await writePredictionSnapshot(db, { ...first, completedAt: '2026-01-01T00:00:00.882Z' })).toBe(true);
  expect((await getPrediction(db, accountId, s.id))!.completedAt!.toISOString()).toBe('2026-01-01T00:00:00.882Z');
  const events = (await eventsAfter(db, s.id, 0)).map((e) => e.event);
  expect(events).toEqual(['output', 'done']);
});

test('a failed prediction streams its error, then done with the reason', async () => {
  const s = snapshot({});
  await writePredictionSnapshot(db, { ...s, status: 'failed', error: 'boom', revision: 2 });
  const events = (await eventsAfter(db, s.id, 0)).map((e) => [e.event, e.data]);
  expect(events).toEqual([
    ['error', 'boom'],
    ['done', '{"reason":"failed"}'],
  ]);
});

test('output holding U+0000 (a byte token) is stored, not retried forever', async () => {
  const s = snapshot({ status: 'succeeded', output: ['a\u0000b'], logs: 'x\u0000\n', revision: 2 });
  await expect(writePredictionSnapshot(db, s)).resolves.toBe(true);
  const row = await getPrediction(db, accountId, s.id);
  expect(row!.output).toEqual(['a\uFFFDb']);
  expect(row!.logs).toBe('x\uFFFD\n');
});
