import { sql } from 'drizzle-orm';
import { queuedOf } from './admissions';
import { builtOnce, type Db } from './client';
import { predictions, rateLimitCounters } from './schema';

export interface RateLimitResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** When the current window ends. */
  resetAt: Date;
}

const WINDOW_MS = 60_000;

// Every create counts itself: built once. The placeholders are bare (sql``), so their values go
// to the driver as given: the window's start as an ISO string, as drizzle would have sent it.
const hitAndQueued = builtOnce((db) => {
  const hit = db.$with('hit').as(
    db
      .insert(rateLimitCounters)
      .values({
        accountId: sql`${sql.placeholder('account')}`,
        scope: sql`${sql.placeholder('scope')}`,
        windowStart: sql`${sql.placeholder('window')}`,
        count: 1,
      })
      .onConflictDoUpdate({
        target: [rateLimitCounters.accountId, rateLimitCounters.scope, rateLimitCounters.windowStart],
        set: { count: sql`${rateLimitCounters.count} + 1` },
      })
      .returning({ count: rateLimitCounters.count }),
  );
  const queued = db
    .select({ n: sql<number>`count(*)::int`.as('n') })
    .from(predictions)
    .where(queuedOf(sql.placeholder('account')));
  return db
    .with(hit)
    .select({ count: hit.count, queued: sql<number>`(${queued})` })
    .from(hit)
    .prepare('hit_rate_limit');
});

/**
 * Counts one request in the account's current one-minute window for `scope` and says whether it
 * is within `limit`. One statement, so concurrent API processes never double-spend a window; the
 * same statement reads the account's queued predictions (max_queued), which every create asks next.
 */
export async function hitRateLimit(
  db: Db,
  accountId: string,
  scope: string,
  limit: number,
  now = Date.now(),
): Promise<RateLimitResult & { queued: number }> {
  const windowStart = new Date(Math.floor(now / WINDOW_MS) * WINDOW_MS);
  const [row] = await hitAndQueued(db).execute({ account: accountId, scope, window: windowStart.toISOString() });
  const resetAt = new Date(windowStart.getTime() + WINDOW_MS);
  return { allowed: row.count <= limit, limit, remaining: Math.max(0, limit - row.count), resetAt, queued: row.queued };
}

/** Old windows are of no use: drop them now and then. */
export async function pruneRateLimits(db: Db): Promise<void> {
  await db.delete(rateLimitCounters).where(sql`${rateLimitCounters.windowStart} < now() - interval '10 minutes'`);
}
