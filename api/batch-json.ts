import type { BatchRow } from '../db/batches';
import { signedFileUrl } from '../lib/file-urls';
import type { UrlContext } from './prediction-json';

/** A batch as the API shows it; the output file's URL is signed afresh on every read. */
export function batchJson(row: BatchRow, ctx: UrlContext, outputSize?: number) {
  const self = `${ctx.baseUrl}/v1/batches/${row.id}`;
  const output = row.outputFileId ? signedFileUrl(ctx.baseUrl, ctx.signer, row.outputFileId) : null;
  return {
    id: row.id,
    status: row.status,
    model: row.model,
    version: row.versionId,
    total: row.total,
    completed: row.completed,
    failed: row.failed,
    chunk_size: row.chunkSize,
    source: row.source,
    error: row.error,
    logs: row.logs,
    attempt: row.attempt,
    run_id: row.runId,
    created_at: row.createdAt.toISOString(),
    started_at: row.startedAt?.toISOString() ?? null,
    completed_at: row.completedAt?.toISOString() ?? null,
    output_file: row.outputFileId
      ? { id: row.outputFileId, size: outputSize ?? null, content_type: 'application/jsonl', urls: { get: output } }
      : null,
    urls: { get: self, cancel: `${self}/cancel`, retry: `${self}/retry`, output },
  };
}
