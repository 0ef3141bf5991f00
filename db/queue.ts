/** What the fair-queue estimate reads (domain/queue-estimate.ts): who waits on a version, what runs, how long it takes. */
import { sql } from 'drizzle-orm';
import type { Db } from './client';

export interface WaitingRow {
  /** The fairness key: the account's group, or the account. */
  key: string;
  weight: number;
  waiting: number;
  /** Waiting predictions of this key that arrived before the one asked about (all of them when none is). */
  earlier: number;
  /** Of those, the asking account's own. */
  accountEarlier: number;
}

export interface QueueReading {
  waiting: WaitingRow[];
  running: number;
  /** Median start-to-end seconds of the version's last SERVICE_SAMPLES successes in the last hour; null when none. */
  serviceSeconds: number | null;
  /**
   * Successes a second since the oldest prediction still waiting arrived (at most BUSY_WINDOW
   * back), from the first of them to the last: the rate the queue has drained at while it was
   * never empty. Null while none waits, or with fewer than MIN_BUSY such successes or under a
   * second between the first and the last.
   */
  busyRate: number | null;
}

/**
 * Successes the service time is the median of. Few enough that a change in the work (longer
 * generations, another tenant's inputs) shows within a burst's first completions: with the last
 * 50, one second of work was still taken for the 0.2 s measured before it, and the estimate was
 * 80 % optimistic (`bench -- fairness -s 1000` after `-s 200`). A median of 16 still shrugs off a
 * few outliers.
 */
const SERVICE_SAMPLES = 16;

/** How far back a busy spell still says what the version keeps up now. */
const BUSY_WINDOW = '30 seconds';
const MIN_BUSY = 5;

/**
 * The version's queue as one statement. `before`: the prediction asked about (it and later
 * arrivals are not `earlier`); absent, a prediction being created, which comes after all of them.
 * The partial indexes on unfinished and on succeeded rows keep each part to the few rows it reads.
 */
export async function readQueue(
  db: Db,
  versionId: string,
  accountId: string,
  before?: { id: string; createdAt: Date },
): Promise<QueueReading> {
  const isEarlier = before ? sql`(p.created_at, p.id) < (${before.createdAt.toISOString()}::timestamptz, ${before.id})` : sql`true`;
  const exclude = before ? sql`and p.id <> ${before.id}` : sql``;
  const [waiting, [counts], [busy]] = await Promise.all([
    db.execute<{ key: string; weight: number; waiting: number; earlier: number; account_earlier: number }>(sql`
      select coalesce(a.fairness_group, a.id) as key, max(a.fairness_weight)::float8 as weight, count(*)::int as waiting,
             (count(*) filter (where ${isEarlier}))::int as earlier,
             (count(*) filter (where ${isEarlier} and p.account_id = ${accountId}))::int as account_earlier
        from predictions p join accounts a on a.id = p.account_id
       where p.version_id = ${versionId} and p.status = 'starting' ${exclude}
       group by 1`),
    db.execute<{ running: number; service: number | null }>(sql`
      select (select count(*)::int from predictions where version_id = ${versionId} and status = 'processing') as running,
             (select percentile_cont(0.5) within group (order by s)
                from (select (metrics->>'predict_time')::float8 as s from predictions
                       where version_id = ${versionId} and status = 'succeeded' and completed_at > now() - interval '1 hour'
                         and metrics ? 'predict_time'
                       order by completed_at desc limit ${SERVICE_SAMPLES}) recent) as service`),
    db.execute<{ n: number; span: number | null }>(sql`
      select count(*)::int as n, extract(epoch from max(p.completed_at) - min(p.completed_at))::float8 as span
        from predictions p,
             (select greatest(min(created_at), now() - ${BUSY_WINDOW}::interval) as since
                from predictions where version_id = ${versionId} and status = 'starting' having count(*) > 0) spell
       where p.version_id = ${versionId} and p.status = 'succeeded' and p.completed_at > spell.since`),
  ]);
  return {
    waiting: waiting.map((w) => ({
      key: w.key,
      weight: w.weight,
      waiting: w.waiting,
      earlier: w.earlier,
      accountEarlier: w.account_earlier,
    })),
    running: counts.running,
    serviceSeconds: counts.service,
    busyRate: busy && busy.span !== null && busy.n >= MIN_BUSY && busy.span >= 1 ? (busy.n - 1) / busy.span : null,
  };
}
