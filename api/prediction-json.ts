import type { PredictionRow } from '../db/predictions';

/** A prediction in Replicate's JSON shape. */
export function predictionJson(row: PredictionRow, baseUrl: string) {
  const self = `${baseUrl}/v1/predictions/${row.id}`;
  return {
    id: row.id,
    model: row.model,
    version: row.versionId,
    input: row.input,
    output: row.output ?? null,
    logs: row.logs,
    error: row.error,
    status: row.status,
    source: row.source,
    data_removed: false,
    created_at: row.createdAt.toISOString(),
    started_at: row.startedAt?.toISOString() ?? null,
    completed_at: row.completedAt?.toISOString() ?? null,
    metrics: row.metrics,
    urls: { get: self, cancel: `${self}/cancel` },
  };
}

export type PredictionJson = ReturnType<typeof predictionJson>;

export const TERMINAL_STATUSES = new Set(['succeeded', 'failed', 'canceled', 'aborted']);
