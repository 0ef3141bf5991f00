/**
 * Retrying a failed, canceled or aborted prediction: a new run of the same workflow
 * (`prediction-<id>`), so the id stays and Temporal's history keeps every run, the old one's
 * output included. Admission, rate limits and webhooks are the create's (api/create-prediction.ts).
 */
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Account } from '../db/accounts';
import type { ResolvedVersion } from '../db/models';
import { getPrediction, type PredictionRow, reopenForRetry, restoreAfterFailedRetry, retryableStatuses } from '../db/predictions';
import type { RateLimitResult } from '../db/rate-limits';
import { predictionWorkflowId } from '../domain/contracts';
import { taskInputSchema } from '../domain/tasks';
import { checkLimits } from './admission-limits';
import { admitAndStart, admitWith, type CreateDeps, type CreateOptions, predictionArgs } from './create-prediction';
import { ApiError, NotFoundError } from './errors';
import { closeOf } from './run-close';
import { parseOr422 } from './validation';

export class NotRetryableError extends ApiError {
  constructor(id: string, status: string) {
    super(409, 'Conflict', `Prediction ${id} is ${status}; only a ${retryableStatuses.join(', ')} prediction can be retried`);
  }
}

/**
 * Starts the new run; `resolved` is the version to run (the prediction's own unless the caller
 * named another). Returns the row as the new run starts, with that run's id.
 */
export async function retryPrediction(
  deps: CreateDeps,
  account: Account,
  before: PredictionRow,
  resolved: ResolvedVersion,
  opts: Pick<CreateOptions, 'priority' | 'cancelAfterSeconds'> = {},
): Promise<{ row: PredictionRow; rateLimit: RateLimitResult }> {
  if (!retryableStatuses.includes(before.status)) throw new NotRetryableError(before.id, before.status);
  // Another version may take other input: it is checked as a create's would be, naming `input`.
  parseOr422(taskInputSchema(resolved.version.task), before.input, 'input');
  const rateLimit = await checkLimits(deps.db, account, resolved.version.task);
  await closeOf(deps.temporal, predictionWorkflowId(before.id));
  const now = new Date();
  const args = predictionArgs(
    account,
    resolved,
    before.id,
    before.input,
    { ...opts, webhook: before.webhook ?? undefined, webhookEventsFilter: before.webhookEventsFilter ?? undefined },
    now,
    before.createdAt,
  );
  const { row, runId } = await admitAndStart(deps, account, args, {
    admit: admitWith(deps.db, account, before.id, async (tx) => {
      const reopened = await reopenForRetry(tx, before.id, {
        versionId: args.versionId,
        model: args.model,
        deadline: args.deadline ? new Date(args.deadline) : null,
      });
      // Retried twice at once: the other retry reopened it first.
      if (!reopened) throw new NotRetryableError(before.id, (await getPrediction(deps.db, account.id, before.id))?.status ?? 'gone');
      return reopened;
    }),
    conflictPolicy: 'FAIL',
    // The status check above is the guard: a closed run of any outcome may be followed by a new one.
    reusePolicy: 'ALLOW_DUPLICATE',
    undo: () => restoreAfterFailedRetry(deps.db, before),
  }).catch((err: unknown) => {
    // The projection says it ended, but its run has not closed yet: it is still running.
    if (err instanceof WorkflowExecutionAlreadyStartedError) throw new NotRetryableError(before.id, 'still running in Temporal');
    throw err;
  });
  if (!row) throw new NotFoundError(`Prediction ${before.id} not found`);
  return { row: { ...row, runId: runId ?? row.runId }, rateLimit };
}
