import type { PredictionRow } from '../db/predictions';
import { predictionWorkflowId } from '../domain/contracts';
import { signUntil, verifyUntil } from '../lib/expiring-signature';
import { renderFileRefs } from '../lib/file-urls';
import type { UrlSigner } from '../lib/signing';
import { type TemporalUi, temporalUiUrl } from '../lib/temporal-ui';
import type { QueueView } from './queue-position';

/** Where a prediction's URLs point: the API's public base, and the signer of stream URLs. */
export interface UrlContext {
  baseUrl: string;
  signer: UrlSigner;
  /** The operators' Temporal UI: set, each prediction links its workflow there. */
  temporalUi?: TemporalUi;
}

/**
 * How long a stream URL may be opened (an open stream runs to its end). Each read of the
 * prediction signs a fresh one, as file URLs are.
 */
export const STREAM_URL_TTL_SECONDS = 3600;

export function streamUrl(ctx: UrlContext, id: string, now = Date.now()): string {
  return `${ctx.baseUrl}/v1/predictions/${id}/stream?${signUntil(ctx.signer, `stream:${id}`, STREAM_URL_TTL_SECONDS, now)}`;
}

export function verifyStreamUrl(signer: UrlSigner, id: string, expires: unknown, sig: unknown, now = Date.now()): boolean {
  return verifyUntil(signer, `stream:${id}`, expires, sig, now);
}

/** A prediction in Replicate's JSON shape. */
/** `retries` is the row's (the API counts it); a snapshot from a workflow has none, and the JSON then leaves it out. */
/** `queue`: where a waiting prediction stands (api/queue-position.ts), on reads of one prediction. */
export function predictionJson(row: Omit<PredictionRow, 'retries'> & { retries?: number }, ctx: UrlContext, queue?: QueueView) {
  const self = `${ctx.baseUrl}/v1/predictions/${row.id}`;
  const workflowId = predictionWorkflowId(row.id);
  return {
    id: row.id,
    model: row.model,
    version: row.versionId,
    input: row.input,
    output: renderFileRefs(row.output ?? null, ctx.baseUrl, ctx.signer),
    logs: row.logs,
    error: row.error,
    status: row.status,
    source: row.source,
    data_removed: false,
    created_at: row.createdAt.toISOString(),
    started_at: row.startedAt?.toISOString() ?? null,
    completed_at: row.completedAt?.toISOString() ?? null,
    metrics: row.metrics,
    webhook: row.webhook ?? undefined,
    webhook_events_filter: row.webhookEventsFilter ?? undefined,
    workflow_id: workflowId,
    ...(row.runId ? { run_id: row.runId } : {}),
    ...(row.retries !== undefined ? { retries: row.retries } : {}),
    ...(queue ? { queue } : {}),
    urls: {
      get: self,
      cancel: `${self}/cancel`,
      stream: streamUrl(ctx, row.id),
      ...(ctx.temporalUi ? { temporal_ui: temporalUiUrl(ctx.temporalUi, workflowId) } : {}),
    },
  };
}
