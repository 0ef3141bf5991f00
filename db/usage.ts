import { and, eq, gte, lt, sql } from 'drizzle-orm';
import { figure } from '../domain/prediction-metrics';
import type { PredictionSnapshot } from '../domain/prediction-snapshot';
import type { Db } from './client';
import { predictions, usageRecords } from './schema';

export type UsageRecord = typeof usageRecords.$inferInsert;

/** What a finished prediction used, from its final snapshot. */
export function usageOf(s: PredictionSnapshot, task: string, hardware: string): UsageRecord {
  return {
    predictionId: s.id,
    accountId: s.accountId,
    model: s.model,
    versionId: s.versionId,
    task,
    status: s.status,
    hardware,
    predictSeconds: figure(s.metrics, 'predict_time') ?? 0,
    inputTokens: figure(s.metrics, 'input_token_count') ?? 0,
    cachedTokens: figure(s.metrics, 'cached_tokens') ?? 0,
    outputTokens: figure(s.metrics, 'output_token_count') ?? 0,
    images: figure(s.metrics, 'image_count') ?? 0,
  };
}

/**
 * Once per run of a prediction that the API started (its create, each retry): the record takes
 * the prediction's `retries` as it stands, which a reset run shares with the run it replaces. A
 * repeated write (an activity retried, the reconciler after the engine) changes nothing.
 */
export async function recordUsage(db: Db | Parameters<Parameters<Db['transaction']>[0]>[0], record: UsageRecord): Promise<void> {
  const retries = sql<number>`coalesce((select ${predictions.retries} from ${predictions} where ${predictions.id} = ${record.predictionId}), 0)`;
  await db
    .insert(usageRecords)
    .values({ ...record, retries })
    .onConflictDoNothing();
}

export interface UsageSummary {
  day: string;
  model: string;
  hardware: string;
  predictions: number;
  predict_time: number;
  input_tokens: number;
  cached_tokens: number;
  output_tokens: number;
  images: number;
}

export async function usageByDayAndModel(db: Db, accountId: string, from: Date, to: Date): Promise<UsageSummary[]> {
  const day = sql<string>`to_char(date_trunc('day', ${usageRecords.createdAt} at time zone 'UTC'), 'YYYY-MM-DD')`;
  const rows = await db
    .select({
      day,
      model: usageRecords.model,
      hardware: usageRecords.hardware,
      predictions: sql<number>`count(*)::int`,
      predict_time: sql<number>`coalesce(sum(${usageRecords.predictSeconds}), 0)::float8`,
      input_tokens: sql<number>`coalesce(sum(${usageRecords.inputTokens}), 0)::int`,
      cached_tokens: sql<number>`coalesce(sum(${usageRecords.cachedTokens}), 0)::int`,
      output_tokens: sql<number>`coalesce(sum(${usageRecords.outputTokens}), 0)::int`,
      images: sql<number>`coalesce(sum(${usageRecords.images}), 0)::int`,
    })
    .from(usageRecords)
    .where(and(eq(usageRecords.accountId, accountId), gte(usageRecords.createdAt, from), lt(usageRecords.createdAt, to)))
    .groupBy(day, usageRecords.model, usageRecords.hardware)
    .orderBy(day, usageRecords.model);
  return rows.map((r) => ({ ...r, predict_time: Number(r.predict_time.toFixed(3)) }));
}
