import { randomBytes } from 'node:crypto';
import { and, desc, eq, inArray, isNull, lt, or, sql } from 'drizzle-orm';
import { newId, sha256Hex } from '../lib/ids';
import { builtOnce, type Db } from './client';
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

// Every request looks its token up (revocation is at once): the query is built once.
const tokenAccount = builtOnce((db) =>
  db
    .select({ account: accounts })
    .from(apiTokens)
    .innerJoin(accounts, eq(accounts.id, apiTokens.accountId))
    .where(and(eq(apiTokens.tokenHash, sql.placeholder('hash')), isNull(apiTokens.revokedAt)))
    .limit(1)
    .prepare('account_for_token'),
);

export async function accountForToken(db: Db, token: string): Promise<Account | undefined> {
  const rows = await tokenAccount(db).execute({ hash: sha256Hex(token) });
  return rows[0]?.account;
}

/** The account, if it exists and is not disabled: what a signed link checks on each use. */
export async function activeAccount(db: Db, accountId: string): Promise<Account | undefined> {
  const [row] = await db
    .select()
    .from(accounts)
    .where(and(eq(accounts.id, accountId), eq(accounts.disabled, false)));
  return row;
}

/**
 * Of the given token hashes and account ids, those still in force: tokens not revoked (of an
 * account not disabled) and accounts not disabled. One look for every connection an API process holds open.
 */
export async function stillInForce(
  db: Db,
  tokenHashes: string[],
  accountIds: string[],
): Promise<{ tokens: Set<string>; accounts: Set<string> }> {
  const [tokenRows, accountRows] = await Promise.all([
    tokenHashes.length === 0
      ? []
      : db
          .select({ hash: apiTokens.tokenHash })
          .from(apiTokens)
          .innerJoin(accounts, eq(accounts.id, apiTokens.accountId))
          .where(and(inArray(apiTokens.tokenHash, tokenHashes), isNull(apiTokens.revokedAt), eq(accounts.disabled, false))),
    accountIds.length === 0
      ? []
      : db
          .select({ id: accounts.id })
          .from(accounts)
          .where(and(inArray(accounts.id, accountIds), eq(accounts.disabled, false))),
  ]);
  return { tokens: new Set(tokenRows.map((r) => r.hash)), accounts: new Set(accountRows.map((r) => r.id)) };
}

export type AccountSettings = Partial<
  Pick<
    Account,
    | 'name'
    | 'fairnessWeight'
    | 'fairnessGroup'
    | 'maxRunning'
    | 'maxQueued'
    | 'overCap'
    | 'rateLimits'
    | 'disabled'
    | 'maxPinnedReplicas'
    | 'maxQueueSeconds'
    | 'maxOpenStreams'
    | 'maxWaitingRequests'
  >
>;

/** Changes the settings given; with none, the account as it is (an UPDATE needs something to set). */
export async function updateAccount(db: Db, accountId: string, settings: AccountSettings): Promise<Account> {
  const given = Object.values(settings).some((v) => v !== undefined);
  const [row] = given
    ? await db.update(accounts).set(settings).where(eq(accounts.id, accountId)).returning()
    : await db.select().from(accounts).where(eq(accounts.id, accountId));
  return row;
}

export type ApiTokenRow = typeof apiTokens.$inferSelect;

export async function listApiTokens(db: Db, accountId: string): Promise<ApiTokenRow[]> {
  return db.select().from(apiTokens).where(eq(apiTokens.accountId, accountId)).orderBy(desc(apiTokens.createdAt));
}

/** Revoked at once for every API process: each request looks its token up. */
export async function revokeApiToken(db: Db, accountId: string, tokenId: string): Promise<ApiTokenRow | undefined> {
  const [row] = await db
    .update(apiTokens)
    .set({ revokedAt: sql`coalesce(${apiTokens.revokedAt}, now())` })
    .where(and(eq(apiTokens.id, tokenId), eq(apiTokens.accountId, accountId)))
    .returning();
  return row;
}

/** Records use at most once a minute per token, so authentication stays a read. */
export async function touchApiToken(db: Db, token: string): Promise<void> {
  await db
    .update(apiTokens)
    .set({ lastUsedAt: sql`now()` })
    .where(
      and(
        eq(apiTokens.tokenHash, sha256Hex(token)),
        or(isNull(apiTokens.lastUsedAt), lt(apiTokens.lastUsedAt, sql`now() - interval '1 minute'`)),
      ),
    );
}
