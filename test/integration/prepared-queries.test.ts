/**
 * Drizzle's queries go to Postgres prepared (db/client.ts preparedQueries): one round trip each
 * once prepared on a connection, where unprepared ones cost two (a describe, then the values).
 */
import { eq, sql } from 'drizzle-orm';
import { closeDb, type Db } from '../../db/client';
import { admit } from '../../db/admissions';
import { accounts, admissions } from '../../db/schema';
import { newId } from '../../lib/ids';
import { newAccount, testDb } from '../helpers';

let db: Db;
beforeAll(() => {
  db = testDb();
});
afterAll(() => closeDb(db));

/** The named statements this transaction's connection holds whose text names `text`. */
async function preparedLike(tx: Parameters<Parameters<Db['transaction']>[0]>[0], text: string): Promise<number> {
  const [row] = await tx.execute<{ n: number }>(sql`select count(*)::int as n from pg_prepared_statements where statement like ${`%${text}%`}`);
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
