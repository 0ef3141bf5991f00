import { randomBytes } from 'node:crypto';
import { and, eq, isNull } from 'drizzle-orm';
import { newId, sha256Hex } from '../lib/ids';
import type { Db } from './client';
import { accounts, apiTokens } from './schema';

export type Account = typeof accounts.$inferSelect;

export async function createAccount(db: Db, username: string, name?: string): Promise<Account> {
  const [row] = await db
    .insert(accounts)
    .values({ id: `acc_${newId()}`, username, name: name ?? username })
    .onConflictDoUpdate({ target: accounts.username, set: { username } })
    .returning();
  return row;
}

export async function findAccountByUsername(db: Db, username: string): Promise<Account | undefined> {
  return db.query.accounts.findFirst({ where: eq(accounts.username, username) });
}

/** Creates a token and returns it in clear: the only moment it exists outside its holder. */
export async function createApiToken(db: Db, accountId: string, name = 'default'): Promise<{ id: string; token: string }> {
  const token = `kiln_${randomBytes(24).toString('base64url')}`;
  const id = `tok_${newId()}`;
  await db.insert(apiTokens).values({ id, accountId, name, tokenHash: sha256Hex(token), prefix: token.slice(0, 9) });
  return { id, token };
}

export async function accountForToken(db: Db, token: string): Promise<Account | undefined> {
  const rows = await db
    .select({ account: accounts })
    .from(apiTokens)
    .innerJoin(accounts, eq(accounts.id, apiTokens.accountId))
    .where(and(eq(apiTokens.tokenHash, sha256Hex(token)), isNull(apiTokens.revokedAt)))
    .limit(1);
  return rows[0]?.account;
}
