/** The projection repository against the real Postgres: ordering, events, and hostile output. */
import { eq } from 'drizzle-orm';
import { admit } from '../../db/admissions';
import { closeDb, type Db } from '../../db/client';
import { appendEvents, eventsAfter } from '../../db/events';
import { finishSucceededPrediction, getPrediction, writePredictionSnapshot } from '../../db/predictions';
import { admissions, usageRecords } from '../../db/schema';
import { usageOf } from '../../db/usage';
import { type PredictionSnapshot } from '../../domain/prediction-snapshot';
import { newAccount, predictionSnapshot, testDb } from '../helpers';

let db: Db;
let accountId: string;
beforeAll(async () => {
  db = testDb();
  accountId = (await newAccount(db, 'proj')).account.id;
});
afterAll(() => closeDb(db));

const snapshot = (over: Partial<PredictionSnapshot>): PredictionSnapshot => predictionSnapshot(accountId, over);

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

test('a finished row the history overturns (replacesEnd): its done goes, a reset, then the new end; without it, nothing changes the stream', async () => {
  const s = snapshot({});
  await writePredictionSnapshot(db, { ...s, status: 'succeeded', output: ['late'], revision: 3 });
  const failed = { ...s, status: 'failed' as const, error: 'terminated by an operator: stop', revision: 4 };
  expect(await writePredictionSnapshot(db, failed, undefined, { replacesEnd: true })).toBe(true);
  expect((await getPrediction(db, accountId, s.id))!).toMatchObject({ status: 'failed', output: null });
  expect((await eventsAfter(db, s.id, 0)).map((e) => [e.event, e.data])).toEqual([
    ['output', '["late"]'],
    ['reset', '{}'],
    ['error', 'terminated by an operator: stop'],
    ['done', '{"reason":"failed"}'],
  ]);
  // An open row's end is its first: no reset, with or without the option.
  const open = snapshot({ status: 'processing', revision: 2 });
  await writePredictionSnapshot(db, open);
  await writePredictionSnapshot(db, { ...open, status: 'failed', error: 'x', revision: 3 }, undefined, { replacesEnd: true });
  expect((await eventsAfter(db, open.id, 0)).map((e) => e.event)).toEqual(['error', 'done']);
});

test('output holding U+0000 (a byte token) is stored, not retried forever', async () => {
  const s = snapshot({ status: 'succeeded', output: ['a\u0000b'], logs: 'x\u0000\n', revision: 2 });
  await expect(writePredictionSnapshot(db, s)).resolves.toBe(true);
  const row = await getPrediction(db, accountId, s.id);
  expect(row!.output).toEqual(['a\uFFFDb']);
  expect(row!.logs).toBe('x\uFFFD\n');
});

describe('the hot path’s final write in one round trip (finishSucceededPrediction)', () => {
  const usageFor = (s: PredictionSnapshot) => usageOf(s, 'text-generation', 'cpu');
  const heldSlots = async (id: string) => (await db.select().from(admissions).where(eq(admissions.predictionId, id))).length;
  const usageRows = async (id: string) => db.select().from(usageRecords).where(eq(usageRecords.predictionId, id));

  test('writes what writePredictionSnapshot would, releases the slot and records usage once', async () => {
    const s = snapshot({ logs: 'one\n', status: 'processing', revision: 1 });
    await writePredictionSnapshot(db, s);
    await admit(db, s.id, accountId, 100);
    const final = {
      ...s,
      logs: 'one\ntwo\n',
      status: 'succeeded' as const,
      output: ['hi', '\u0000!'],
      metrics: { predict_time: 0.5, output_token_count: 3 },
      completedAt: new Date().toISOString(),
      revision: 4,
    };
    expect(await finishSucceededPrediction(db, final, usageFor(final))).toBe(true);
    // Again, as a retried activity would: no second event, no second usage record.
    expect(await finishSucceededPrediction(db, final, usageFor(final))).toBe(true);
    const row = (await getPrediction(db, accountId, s.id))!;
    expect([row.status, row.output, row.logs, row.revision, row.metrics]).toEqual([
      'succeeded',
      ['hi', '\uFFFD!'],
      'one\ntwo\n',
      4,
      { predict_time: 0.5, output_token_count: 3 },
    ]);
    expect(row.completedAt!.toISOString()).toBe(final.completedAt);
    expect((await eventsAfter(db, s.id, 0)).map((e) => [e.event, e.data])).toEqual([
      ['logs', 'one'],
      ['logs', 'two'],
      ['output', '["hi","\uFFFD!"]'],
      ['done', '{}'],
    ]);
    expect(await heldSlots(s.id)).toBe(0);
    const usage = await usageRows(s.id);
    expect(usage.map((u) => [u.status, u.hardware, u.predictSeconds, u.outputTokens, u.retries])).toEqual([
      ['succeeded', 'cpu', 0.5, 3, 0],
    ]);
  });

  test('a streamed output is not repeated, a newer revision is never overwritten, and a missing row is not created', async () => {
    const s = snapshot({ status: 'processing', revision: 1 });
    await writePredictionSnapshot(db, s);
    await appendEvents(db, s.id, [{ event: 'output', data: 'streamed' }]);
    const final = { ...s, status: 'succeeded' as const, output: 'streamed', completedAt: new Date().toISOString(), revision: 3 };
    expect(await finishSucceededPrediction(db, { ...final, revision: 0 }, usageFor(final))).toBe(false);
    expect(await finishSucceededPrediction(db, final, usageFor(final))).toBe(true);
    expect((await eventsAfter(db, s.id, 0)).map((e) => e.event)).toEqual(['output', 'done']);
    const missing = snapshot({ status: 'succeeded', output: 'x', revision: 2 });
    expect(await finishSucceededPrediction(db, missing, usageFor(missing))).toBe(false);
    expect(await getPrediction(db, accountId, missing.id)).toBeUndefined();
  });

  test('a row another run wrote goes the way that asks which run is current', async () => {
    const s = snapshot({ status: 'processing', revision: 5 });
    await writePredictionSnapshot(db, s, { runId: 'run-new', isCurrent: async () => true });
    const final = { ...s, status: 'succeeded' as const, output: 'old', completedAt: new Date().toISOString(), revision: 9 };
    // The old run's engine, after an operator's reset: the new run is current, so its write loses.
    expect(await finishSucceededPrediction(db, final, usageFor(final), { runId: 'run-old', isCurrent: async () => false })).toBe(false);
    expect((await getPrediction(db, accountId, s.id))!.status).toBe('processing');
    expect(await usageRows(s.id)).toEqual([]);
  });
});
