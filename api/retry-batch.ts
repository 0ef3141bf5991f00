/**
 * Retrying a batch: a new run of the same workflow (`batch-<id>`) that runs again only the items
 * that did not succeed (failed ones, and those a failed or canceled run never reached). Items
 * that succeeded keep their output lines; the id stays, and Temporal's history keeps every run.
 */
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Account } from '../db/accounts';
import { type BatchRow, getBatch, reopenBatchForRetry, restoreBatchAfterFailedRetry } from '../db/batches';
import type { Db } from '../db/client';
import { batchWorkflowId } from '../domain/batch-contracts';
import { ApiError, NotFoundError } from './errors';
import { resolveVersionRef } from './resolve-version';
import { closeOf } from './run-close';
import { type BatchRunSettings, batchArgsOf, startBatchRun } from './start-batch';

export class BatchNotRetryableError extends ApiError {
  constructor(id: string, why: string) {
    super(409, 'Conflict', `Batch ${id} ${why}; only a failed or canceled batch, or one with failed items, can be retried`);
  }
}

/** Why the batch cannot be retried as it stands, or undefined when it can. */
function notRetryable(row: BatchRow): string | undefined {
  if (row.status === 'starting' || row.status === 'processing') return `is ${row.status}`;
  if (row.status === 'succeeded' && row.failed === 0) return 'succeeded with no failed items';
  return undefined;
}

export async function retryBatch(deps: BatchRunSettings & { db: Db }, account: Account, before: BatchRow): Promise<BatchRow> {
  const why = notRetryable(before);
  if (why) throw new BatchNotRetryableError(before.id, why);
  const resolved = await resolveVersionRef(deps.db, account.id, before.versionId);
  await closeOf(deps.temporal, batchWorkflowId(before.id));
  const reopened = await reopenBatchForRetry(deps.db, before);
  // Retried twice at once: the other retry reopened it first.
  if (!reopened) throw new BatchNotRetryableError(before.id, `is ${(await getBatch(deps.db, account.id, before.id))?.status ?? 'gone'}`);
  const args = batchArgsOf(
    deps,
    account,
    resolved,
    { id: before.id, total: before.total, chunkSize: before.chunkSize, source: before.source, createdAt: before.createdAt.toISOString() },
    { attempt: reopened.attempt },
  );
  let runId: string;
  try {
    runId = await startBatchRun(deps, account, args);
  } catch (err) {
    await restoreBatchAfterFailedRetry(deps.db, before);
    // The projection says it ended, but its run has not closed yet: it is still running.
    if (err instanceof WorkflowExecutionAlreadyStartedError) throw new BatchNotRetryableError(before.id, 'is still running in Temporal');
    throw err;
  }
  const row = await getBatch(deps.db, account.id, before.id);
  if (!row) throw new NotFoundError(`Batch ${before.id} not found`);
  // The row names no run until the new one writes it: the answer names it at once.
  return { ...row, runId: row.runId ?? runId };
}
