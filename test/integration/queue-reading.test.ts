/**
 * What the queue estimate reads from Postgres (db/queue.ts): the version's service time follows
 * its recent work, a slot's hand-over to its next task is measured only where one was waiting,
 * and the waiting rows are counted by fairness key.
 */
import { inArray } from 'drizzle-orm';
import { closeDb, type Db } from '../../db/client';
import { readQueue } from '../../db/queue';
import { predictions } from '../../db/schema';
import { newId } from '../../lib/ids';
import { newAccount, testDb } from '../helpers';

let db: Db;
const written: string[] = [];
beforeAll(() => {
  db = testDb();
});
afterAll(async () => {
  if (written.length > 0) await db.delete(predictions).where(inArray(predictions.id, written));
  await closeDb(db);
});

/** Succeeded predictions of `versionId` that each ran `seconds`, completed `agoSeconds` back and later one by one. */
async function succeeded(accountId: string, versionId: string, seconds: number, count: number, agoSeconds: number): Promise<void> {
  const now = Date.now();
  const rows = Array.from({ length: count }, (_, i) => {
    const completedAt = new Date(now - (agoSeconds - i * 0.1) * 1000);
    return {
      id: newId(),
      accountId,
      model: 'kiln/echo-fixture',
      versionId,
      input: { text: 'x' },
      status: 'succeeded' as const,
      metrics: { predict_time: seconds },
      createdAt: new Date(completedAt.getTime() - seconds * 1000 - 50),
      startedAt: new Date(completedAt.getTime() - seconds * 1000),
      completedAt,
    };
  });
  written.push(...rows.map((r) => r.id));
  await db.insert(predictions).values(rows);
}

test('the service time is the median of the recent work: a change in it shows within a burst of completions', async () => {
  const { account } = await newAccount(db, 'queue-read');
  const versionId = `queue-read-${newId()}`;
  expect((await readQueue(db, versionId, account.id)).serviceSeconds).toBeNull();
  // A long history of 0.2 s work, then the work changes to 1 s.
  await succeeded(account.id, versionId, 0.2, 60, 600);
  expect((await readQueue(db, versionId, account.id)).serviceSeconds).toBeCloseTo(0.2, 5);
  await succeeded(account.id, versionId, 1, 9, 60);
  expect((await readQueue(db, versionId, account.id)).serviceSeconds).toBeCloseTo(1, 5);
  // Work finished over an hour ago says nothing about now.
  const stale = `queue-read-${newId()}`;
  await succeeded(account.id, stale, 3, 5, 3_700);
  expect((await readQueue(db, stale, account.id)).serviceSeconds).toBeNull();
});

test('the hand-over is the time from a slot coming free to the start of a prediction that was waiting for it', async () => {
  const { account } = await newAccount(db, 'queue-handover');
  const row = (versionId: string, createdAt: number, startedAt: number, completedAt?: number) => ({
    id: newId(),
    accountId: account.id,
    model: 'kiln/echo-fixture',
    versionId,
    input: { text: 'x' },
    status: completedAt === undefined ? ('processing' as const) : ('succeeded' as const),
    metrics: completedAt === undefined ? ({} as Record<string, number>) : { predict_time: (completedAt - startedAt) / 1000 },
    createdAt: new Date(createdAt),
    startedAt: new Date(startedAt),
    completedAt: completedAt === undefined ? null : new Date(completedAt),
  });
  // One slot with a backlog: all created at once, each starting 60 ms after the last ended
  // (the last still running).
  const backlogged = `queue-read-${newId()}`;
  const t0 = Date.now() - 60_000;
  const chain = Array.from({ length: 6 }, (_, i) => {
    const startedAt = t0 + 100 + i * 260;
    return row(backlogged, t0, startedAt, i < 5 ? startedAt + 200 : undefined);
  });
  // One slot without: each prediction came after the last had ended, so no slot passed to it.
  const idle = `queue-read-${newId()}`;
  const spaced = Array.from({ length: 6 }, (_, i) => row(idle, t0 + i * 1000, t0 + i * 1000 + 10, t0 + i * 1000 + 210));
  written.push(...[...chain, ...spaced].map((r) => r.id));
  await db.insert(predictions).values([...chain, ...spaced]);
  expect((await readQueue(db, backlogged, account.id)).handoverSeconds).toBeCloseTo(0.06, 5);
  expect((await readQueue(db, idle, account.id)).handoverSeconds).toBeNull();
});

test('waiting predictions are counted by fairness key, and those earlier than the one asked about', async () => {
  const { account } = await newAccount(db, 'queue-read-a');
  const { account: other } = await newAccount(db, 'queue-read-b');
  const versionId = `queue-read-${newId()}`;
  const t0 = Date.now() - 10_000;
  const waiting = (accountId: string, at: number) => ({
    id: newId(),
    accountId,
    model: 'kiln/echo-fixture',
    versionId,
    input: { text: 'x' },
    status: 'starting' as const,
    createdAt: new Date(t0 + at),
  });
  const rows = [waiting(account.id, 0), waiting(other.id, 1), waiting(other.id, 2), waiting(account.id, 3), waiting(other.id, 4)];
  written.push(...rows.map((r) => r.id));
  await db.insert(predictions).values(rows);
  const asked = rows[3];
  const reading = await readQueue(db, versionId, account.id, { id: asked.id, createdAt: asked.createdAt });
  const byKey = new Map(reading.waiting.map((w) => [w.key, w]));
  expect(byKey.get(account.id)).toMatchObject({ waiting: 1, earlier: 1, accountEarlier: 1 });
  expect(byKey.get(other.id)).toMatchObject({ waiting: 3, earlier: 2, accountEarlier: 0 });
  expect(reading.running).toBe(0);
});
