/**
 * Drizzle's queries go to Postgres prepared (db/client.ts preparedQueries): one round trip each
 * once prepared on a connection, where unprepared ones cost two (a describe, then the values).
 * The hot path's queries are built once (builtOnce) and run on the pool or in a transaction.
 */
import { eq, sql } from 'drizzle-orm';
import { admit } from '../../db/admissions';
import { builtOnce, closeDb, type Db } from '../../db/client';
import { recentLiveNodes } from '../../db/nodes';
import { createAdmitted, getPrediction } from '../../db/predictions';
import { accounts, admissions, predictions } from '../../db/schema';
import { type PredictionSnapshot } from '../../domain/prediction-snapshot';
import { newId } from '../../lib/ids';
import { newAccount, poll, predictionSnapshot, testDb } from '../helpers';

let db: Db;
beforeAll(() => {
  db = testDb();
});
afterAll(() => closeDb(db));

/** The named statements this transaction's connection holds whose text names `text`. */
async function preparedLike(tx: Parameters<Parameters<Db['transaction']>[0]>[0], text: string): Promise<number> {
  const [row] = await tx.execute<{ n: number }>(
    sql`select count(*)::int as n from pg_prepared_statements where statement like ${`%${text}%`}`,
  );
  return row.n;
}

test('a parameterized query is a prepared statement on its connection, in a transaction too', async () => {
  const { account } = await newAccount(db, 'prep');
  await db.transaction(async (tx) => {
    const [found] = await tx.select({ id: accounts.id }).from(accounts).where(eq(accounts.username, account.username));
    expect(found.id).toBe(account.id);
    expect(await preparedLike(tx, 'from "accounts" where "accounts"."username" = $1')).toBe(1);
    // The second time it runs, on the same connection, it is the same statement.
    await tx.select({ id: accounts.id }).from(accounts).where(eq(accounts.username, account.username));
    expect(await preparedLike(tx, 'from "accounts" where "accounts"."username" = $1')).toBe(1);
  });
});

test('admission under the account lock: one slot per prediction, none past the cap', async () => {
  const { account } = await newAccount(db, 'prep-adm');
  const [a, b, c] = [newId(), newId(), newId()];
  expect(await admit(db, a, account.id, 2)).toEqual({ admitted: true, held: 1 });
  // Admitting the same prediction again keeps its slot and takes no other.
  expect(await admit(db, a, account.id, 2)).toEqual({ admitted: true, held: 1 });
  // Concurrent admissions: the lock makes count-and-insert one step, so exactly one of two gets the last slot.
  const results = await Promise.all([admit(db, b, account.id, 2), admit(db, c, account.id, 2)]);
  expect(results.filter((r) => r.admitted)).toHaveLength(1);
  const held = await db.select().from(admissions).where(eq(admissions.accountId, account.id));
  expect(held).toHaveLength(2);
});

test('a create writes its row and takes a slot in one call: nulls stay SQL NULL, none past the cap', async () => {
  const { account } = await newAccount(db, 'prep-create');
  const first = (id: string): PredictionSnapshot =>
    predictionSnapshot(account.id, {
      id,
      model: 'kiln/echo-fixture',
      input: { text: 'x' },
      webhook: null,
      webhookEventsFilter: null,
      deadline: '2030-01-01T00:00:00.000Z',
      revision: 0,
    });
  const [a, b, c, d] = [newId(), newId(), newId(), newId()];
  const created = await createAdmitted(db, first(a), 2);
  expect(created.admitted).toBe(true);
  expect(created.row).toEqual(await getPrediction(db, account.id, a));
  expect(created.row).toMatchObject({ id: a, status: 'starting', input: { text: 'x' }, output: null, startedAt: null, retries: 0 });
  expect(created.row?.deadline?.toISOString()).toBe('2030-01-01T00:00:00.000Z');
  // output null is SQL NULL, not JSON null: `output is null` finds it.
  const [nulls] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(predictions)
    .where(sql`${predictions.id} = ${a} and ${predictions.output} is null and ${predictions.webhookEventsFilter} is null`);
  expect(nulls.n).toBe(1);
  // The same id again (a create retried with its Idempotency-Key): nothing written, nothing taken.
  expect(await createAdmitted(db, first(a), 2)).toEqual({ row: undefined, admitted: false });
  // Two at once for the last slot: the account's lock lets exactly one have it; both rows are written.
  const both = await Promise.all([createAdmitted(db, first(b), 2), createAdmitted(db, first(c), 2)]);
  expect(both.filter((r) => r.admitted)).toHaveLength(1);
  expect(both.every((r) => r.row !== undefined)).toBe(true);
  expect(await createAdmitted(db, first(d), 2)).toMatchObject({ admitted: false });
  expect(await db.select().from(admissions).where(eq(admissions.accountId, account.id))).toHaveLength(2);
});

test('builtOnce builds its query once, and runs it in the transaction it is given', async () => {
  let builds = 0;
  const byName = builtOnce((d) => {
    builds += 1;
    return d
      .select({ id: accounts.id })
      .from(accounts)
      .where(eq(accounts.username, sql.placeholder('name')))
      .prepare('test_account_by_name');
  });
  const { account } = await newAccount(db, 'prep-once');
  expect(await byName(db).execute({ name: account.username })).toEqual([{ id: account.id }]);
  await db.transaction(async (tx) => expect(await byName(tx).execute({ name: account.username })).toEqual([{ id: account.id }]));
  expect(builds).toBe(1);
  const slot = builtOnce((d) =>
    d
      .insert(admissions)
      .values({ predictionId: sql`${sql.placeholder('id')}`, accountId: sql`${sql.placeholder('account')}` })
      .prepare('test_insert_slot'),
  );
  const undone = newId();
  await expect(
    db.transaction(async (tx) => {
      await slot(tx).execute({ id: undone, account: account.id });
      throw new Error('roll back');
    }),
  ).rejects.toThrow('roll back');
  expect(await db.select().from(admissions).where(eq(admissions.predictionId, undone))).toHaveLength(0);
});

test('a create reads the live nodes at most once per interval: one read shared, a fresh one after, a failed one not kept', async () => {
  const nodesFor = recentLiveNodes(200);
  const first = nodesFor(db);
  expect(nodesFor(db)).toBe(first);
  expect(Array.isArray(await first)).toBe(true);
  // Past the interval: a new read.
  await poll(
    async () => ({ read: nodesFor(db) }),
    ({ read }) => read !== first,
    { timeoutMs: 5_000, intervalMs: 50 },
  );
  // A read that fails (a closed pool) is not what the next create gets.
  const closed = testDb();
  await closeDb(closed);
  const failing = recentLiveNodes(60_000);
  await expect(failing(closed)).rejects.toThrow();
  await expect(failing(db)).resolves.toEqual(expect.any(Array));
});
