/**
 * Event-sourced projections: every prediction's and batch's state lives in its workflow. A
 * finished workflow's result is its final state; a running one answers its query. Reading them
 * and writing them back (db/rebuild.ts: upserts by revision) rebuilds the predictions and
 * batches tables from Temporal, a page of workflows at a time. Rows Temporal cannot say anything
 * about (their history is past retention) stay as they are; so do rows of runs that closed
 * without a result (terminated, timed out), which the reconciler finished from their history.
 */
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { type ArchivedHistory, archivedHistories, resultOf } from '../activities/history-archive';
import { runWriterOf } from '../activities/run-writer';
import type { Db } from '../db/client';
import { type RebuildOutcome, upsertBatchFromHistory, upsertPredictionFromHistory } from '../db/rebuild';
import type { BatchSnapshot } from '../domain/batch-contracts';
import type { PredictionSnapshot } from '../domain/prediction-snapshot';
import type { Storage } from '../lib/storage';
import { workflowExists } from '../lib/temporal-workflows';

export interface RebuildCounts {
  /** Workflow runs read. */
  read: number;
  /** Rows written from history. */
  written: number;
  /** Rows that knew as much or more than history (or belong to a newer run): left as they were. */
  kept: number;
  /** Runs whose state could not be read (closed without a result, or the query failed). */
  unreadable: number;
}

interface Kind<S> {
  workflowType: string;
  query: string;
  upsert: (db: Db, state: S, writer: ReturnType<typeof runWriterOf>) => Promise<RebuildOutcome>;
}

const PREDICTIONS: Kind<PredictionSnapshot> = {
  workflowType: 'predictionWorkflow',
  query: 'prediction',
  upsert: upsertPredictionFromHistory,
};
const BATCHES: Kind<BatchSnapshot> = { workflowType: 'batchWorkflow', query: 'batch', upsert: upsertBatchFromHistory };

/** Workflows listed per page, and read at once within a page: fast, without flooding the frontend. */
const PAGE_SIZE = 100;
const READS_AT_ONCE = 16;

async function stateOf<S>(temporal: Client, kind: Kind<S>, execution: WorkflowExecutionInfo): Promise<S | undefined> {
  const handle = temporal.workflow.getHandle(execution.workflowId, execution.runId, { followRuns: false });
  try {
    if (execution.status.name === 'RUNNING') return await handle.query<S>(kind.query);
    // This run's own result, not a later run's (a batch continues as new; a reset starts another run).
    if (execution.status.name === 'COMPLETED') return (await handle.result()) as S;
  } catch {
    // Unreadable: the row, if any, stays.
  }
  return undefined;
}

async function rebuildKind<S>(
  db: Db,
  temporal: Client,
  kind: Kind<S>,
  counts: RebuildCounts,
  onProgress?: (c: RebuildCounts) => void,
): Promise<void> {
  const page: WorkflowExecutionInfo[] = [];
  const flush = async () => {
    const pending = [...page];
    page.length = 0;
    for (let i = 0; i < pending.length; i += READS_AT_ONCE) {
      await Promise.all(
        pending.slice(i, i + READS_AT_ONCE).map(async (execution) => {
          counts.read += 1;
          const state = await stateOf(temporal, kind, execution);
          if (state === undefined) {
            counts.unreadable += 1;
            return;
          }
          const outcome = await kind.upsert(db, state, runWriterOf(temporal, execution.workflowId, execution.runId));
          counts[outcome] += 1;
        }),
      );
    }
    onProgress?.(counts);
  };
  // Runs that continued as new hand their state to the next run, which is listed too.
  const query = `WorkflowType = "${kind.workflowType}" AND ExecutionStatus != "ContinuedAsNew"`;
  for await (const execution of temporal.workflow.list({ query, pageSize: PAGE_SIZE })) {
    page.push(execution);
    if (page.length >= PAGE_SIZE) await flush();
  }
  await flush();
}

/**
 * The workflows Temporal no longer has (past retention), from Kiln's archive of closed histories
 * (activities/history-archive.ts): each one's last run, if it closed with a result, upserted by
 * revision like the rest. Workflows Temporal still has were read from Temporal above.
 */
async function rebuildFromArchive(db: Db, temporal: Client, storage: Storage, counts: RebuildCounts): Promise<void> {
  // Of each workflow, the run that closed last is its last word: only that run's last event is kept.
  const lastOf = new Map<string, ArchivedHistory>();
  const read = new Set<string>();
  for await (const run of archivedHistories(storage)) {
    read.add(`${run.workflowId}/${run.runId}`);
    const kept = lastOf.get(run.workflowId);
    if (kept && kept.closedAt >= run.closedAt) continue;
    const events = run.history.events ?? [];
    lastOf.set(run.workflowId, { ...run, history: { events: events.slice(-1) } });
  }
  counts.read += read.size;
  for (const [workflowId, last] of lastOf) {
    const kind = workflowId.startsWith('prediction-') ? 'prediction' : workflowId.startsWith('batch-') ? 'batch' : undefined;
    if (!kind || (await workflowExists(temporal, workflowId))) continue;
    // A run that closed without a result (terminated) was finished by the reconciler, whose row stays.
    const result = await resultOf<PredictionSnapshot & BatchSnapshot>(last, temporal.options.loadedDataConverter);
    if (!result) {
      counts.unreadable += 1;
      continue;
    }
    const writer = { runId: last.runId, isCurrent: async () => true };
    const outcome =
      kind === 'prediction' ? await upsertPredictionFromHistory(db, result, writer) : await upsertBatchFromHistory(db, result, writer);
    counts[outcome] += 1;
  }
}

export async function rebuildProjections(
  db: Db,
  temporal: Client,
  onProgress?: (kind: string, c: RebuildCounts) => void,
  archive?: Storage,
): Promise<{ predictions: RebuildCounts; batches: RebuildCounts; archive?: RebuildCounts }> {
  const fresh = (): RebuildCounts => ({ read: 0, written: 0, kept: 0, unreadable: 0 });
  const predictions = fresh();
  await rebuildKind(db, temporal, PREDICTIONS, predictions, (c) => onProgress?.('predictions', c));
  const batches = fresh();
  await rebuildKind(db, temporal, BATCHES, batches, (c) => onProgress?.('batches', c));
  if (!archive) return { predictions, batches };
  const archived = fresh();
  await rebuildFromArchive(db, temporal, archive, archived);
  return { predictions, batches, archive: archived };
}
