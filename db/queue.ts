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
   * Median seconds from a slot coming free (one of the last SERVICE_SAMPLES successes) to the
   * next start of a prediction that was already waiting then: what a busy slot takes to pass to
   * its next task, beyond the service time. Null when none of them had one waiting.
   */
  handoverSeconds: number | null;
}

/**
 * Successes the service time is the median of. Few enough that a change in the work (longer
 * generations, another tenant's inputs) shows within a burst's first completions: with the last
 * 50, one second of work was still taken for the 0.2 s measured before it, and the estimate was
 * 80 % optimistic (`bench -- fairness -s 1000` after `-s 200`). A median of 16 still shrugs off a
 * few outliers.
 */
const SERVICE_SAMPLES = 16;

/**
 * Successes read to find the starts that followed the last SERVICE_SAMPLES: a start that followed
 * one of them ended after it, so it is among these (or still running) while the slots serving the
 * version are at most their difference.
 */
const HANDOVER_ROWS = SERVICE_SAMPLES + 32;

/**
 * The version's queue, read in three queries at once. `before`: the prediction asked about (it and later
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
  const [waiting, [counts], [handover]] = await Promise.all([
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
    db.execute<{ handover: number | null }>(sql`
      with recent as (
        (select created_at, started_at, completed_at from predictions
          where version_id = ${versionId} and status = 'succeeded' and completed_at > now() - interval '1 hour'
          order by completed_at desc limit ${HANDOVER_ROWS})
        union all
        (select created_at, started_at, null from predictions where version_id = ${versionId} and status = 'processing'))
      select percentile_cont(0.5) within group (order by gap) as handover
        from (select extract(epoch from (select min(n.started_at) from recent n
                                           where n.started_at >= freed.completed_at and n.created_at < freed.completed_at)
                                        - freed.completed_at)::float8 as gap
                from (select completed_at from recent where completed_at is not null
                       order by completed_at desc limit ${SERVICE_SAMPLES}) freed) gaps
       where gap is not null`),
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
    handoverSeconds: handover?.handover ?? null,
  };
}
