/**
 * Starting a run of a batch's workflow (`batch-<id>`): the create's first run and a retry's
 * later one take the same arguments, rebuilt for a retry from the batch's row and version.
 */
import type { Client } from '@temporalio/client';
import type { Account } from '../db/accounts';
import type { ResolvedVersion } from '../db/models';
import { type BatchArgs, batchWorkflowId } from '../domain/batch-contracts';
import { PRIORITY_KEYS } from '../domain/contracts';
import { KilnAccount, KilnModel, KilnStatus } from '../domain/search-attributes';
import type { batchWorkflow } from '../workflows/batch';

export interface BatchRunSettings {
  temporal: Client;
  controlQueue: string;
  parallelism: number;
  chunksPerRun: number;
}

export function batchArgsOf(
  settings: BatchRunSettings,
  account: Account,
  resolved: ResolvedVersion,
  batch: { id: string; total: number; chunkSize: number; source: string; createdAt: string },
  rerun?: BatchArgs['rerun'],
): BatchArgs {
  return {
    ...batch,
    accountId: account.id,
    model: `${resolved.model.owner}/${resolved.model.name}`,
    versionId: resolved.version.id,
    task: resolved.version.task,
    // Below interactive and default work of every account in the model's fair queue.
    priority: {
      fairnessKey: account.fairnessGroup ?? account.id,
      fairnessWeight: account.fairnessWeight,
      priorityKey: PRIORITY_KEYS.batch,
    },
    retry: resolved.version.retry ?? undefined,
    parallelism: settings.parallelism,
    chunksPerRun: settings.chunksPerRun,
    ...(rerun ? { rerun } : {}),
  };
}

/** Starts the run; a retry's may follow a closed run of any outcome (its caller checked the batch may be retried). Returns its run id. */
export async function startBatchRun(settings: BatchRunSettings, account: Account, args: BatchArgs): Promise<string> {
  const handle = await settings.temporal.workflow.start<typeof batchWorkflow>('batchWorkflow', {
    workflowId: batchWorkflowId(args.id),
    taskQueue: settings.controlQueue,
    args: [args],
    typedSearchAttributes: [
      { key: KilnAccount, value: account.username },
      { key: KilnModel, value: args.model },
      { key: KilnStatus, value: 'starting' },
    ],
    memo: {
      kind: 'batch',
      total: args.total,
      chunk_size: args.chunkSize,
      source: args.source,
      completed: 0,
      failed: 0,
      ...(args.rerun ? { attempt: args.rerun.attempt } : {}),
    },
    staticSummary: `${args.rerun ? `retry ${args.rerun.attempt - 1} of ` : ''}batch of ${args.total} on ${args.model} for ${account.username}`,
    priority: args.priority,
    ...(args.rerun ? { workflowIdReusePolicy: 'ALLOW_DUPLICATE' as const, workflowIdConflictPolicy: 'FAIL' as const } : {}),
  });
  return handle.firstExecutionRunId;
}
