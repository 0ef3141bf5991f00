/**
 * The reconciler's one step: finish what a closed workflow left open. A prediction or batch whose
 * workflow was terminated, timed out, or failed or was canceled before its last step never ran
 * its final writes, so its row says `starting`/`processing` and its admission slot stays taken.
 * Here they are finished from history: the closed run's own state (its query, answered by
 * replaying the history), the status and error its close event says, the slot released, usage
 * recorded once, the stream closed and the completed webhook sent if one was asked for.
 * A run that closed early after its engine wrote the final row (a terminate racing the end) is
 * followed too: the row takes the history's outcome, read from recent closes.
 * Every write is idempotent (revisions, `on conflict do nothing`, webhook ids that may run once),
 * so a tick that dies half-way is finished by the next.
 */
import { log } from '@temporalio/activity';
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { release } from '../db/admissions';
import { writeBatchSnapshot, type BatchRow } from '../db/batches';
import type { Db } from '../db/client';
import { rowToSnapshot, writePredictionSnapshot } from '../db/predictions';
import { heldSlots, openBatches, openPredictions, predictionRows, versionTask } from '../db/reconcile';
import { recordUsage, usageOf } from '../db/usage';
import { batchWorkflowId, type BatchSnapshot } from '../domain/batch-contracts';
import { predictionWorkflowId, webhookWorkflowId, type WebhookDelivery } from '../domain/contracts';
import { ENGINE_REVISIONS } from '../domain/engine-projection';
import { type PredictionSnapshot } from '../domain/prediction-snapshot';
import { isTerminalStatus } from '../domain/statuses';
import type { Storage } from '../lib/storage';
import { ArchiveMemory, archiveClosedHistories } from './history-archive';
import { runWriterOf } from './run-writer';

export interface ReconcilerDeps {
  db: Db;
  temporal: Client;
  /** Where the completed webhook's delivery workflow runs. */
  controlQueue: string;
  /** Rows and slots younger than this are not looked at: their workflow has barely begun. */
  minAgeMs?: number;
  /** Rows, batches and slots read per page (every page is read, each look). */
  pageSize?: number;
  /** Where closed histories are copied (activities/history-archive.ts); none: not copied. */
  storage?: Storage;
}

/** How long one look may spend copying histories: the rest is the next look's. */
const ARCHIVE_BUDGET_MS = 30_000;

/**
 * Which of these workflow ids have a closed run, by Temporal's visibility: one query per 50 ids,
 * so a look at thousands of open rows costs tens of queries, not a describe each.
 */
export async function withClosedRuns(client: Client, workflowIds: string[]): Promise<Set<string>> {
  const closed = new Set<string>();
  for (let i = 0; i < workflowIds.length; i += 50) {
    // Kiln's workflow ids are made of ids it generates: nothing to escape.
    const ids = workflowIds.slice(i, i + 50).map((id) => `'${id}'`);
    for await (const wf of client.workflow.list({ query: `WorkflowId IN (${ids.join(', ')}) AND ExecutionStatus != 'Running'` }))
      closed.add(wf.workflowId);
  }
  return closed;
}

/** How far back the first look after a start reads closes: older ones are the open rows' pass's. */
const FIRST_LOOK_BACK_MS = 60 * 60_000;
/** Visibility records a close a moment after it: each look reads from a little before the last. */
const VISIBILITY_LAG_MS = 60_000;

/**
 * Prediction workflows that closed since `since` otherwise than by completing: terminated,
 * canceled, timed out or failed, whatever their row says. One visibility query.
 */
export async function predictionsClosedEarlySince(client: Client, since: Date): Promise<string[]> {
  const ids = new Set<string>();
  const query =
    "WorkflowType = 'predictionWorkflow' AND ExecutionStatus IN ('Terminated', 'Canceled', 'TimedOut', 'Failed') " +
    `AND CloseTime > '${since.toISOString()}'`;
  for await (const wf of client.workflow.list({ query })) ids.add(wf.workflowId);
  return [...ids];
}

const PREDICTION_WORKFLOW_PREFIX = predictionWorkflowId('');

/** How a workflow ended, from its close event. */
export interface ClosedRun {
  runId: string;
  status: 'COMPLETED' | 'FAILED' | 'CANCELLED' | 'TERMINATED' | 'TIMED_OUT' | 'CONTINUED_AS_NEW';
  closeTime: Date;
  /** Why, in words: the operator's reason, the failure's message. */
  reason: string;
}

export type WorkflowState = ClosedRun | 'running' | 'missing';

/** The latest run of a workflow id: running, closed (and how), or unknown to Temporal (never started, or past retention). */
export async function latestRun(client: Client, workflowId: string): Promise<WorkflowState> {
  let described;
  try {
    described = await client.workflow.getHandle(workflowId).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return 'missing';
    throw err;
  }
  const status = described.status.name;
  if (status === 'RUNNING' || status === 'UNKNOWN' || status === 'PAUSED' || status === 'UNSPECIFIED') return 'running';
  // The close event is the last one: read the history backwards, one event.
  const { history } = await client.workflowService.getWorkflowExecutionHistoryReverse({
    namespace: client.options.namespace,
    execution: { workflowId, runId: described.runId },
    maximumPageSize: 1,
  });
  const last = history?.events?.[0];
  const reason =
    last?.workflowExecutionTerminatedEventAttributes?.reason ??
    last?.workflowExecutionFailedEventAttributes?.failure?.message ??
    (last?.workflowExecutionTimedOutEventAttributes ? 'the workflow ran past its timeout' : undefined) ??
    '';
  return { runId: described.runId, status, closeTime: described.closeTime ?? new Date(), reason };
}

/** The status and error a prediction or batch gets from how its workflow ended early. */
export function outcomeOf(run: ClosedRun): { status: 'failed' | 'canceled'; error: string | null; logLine: string } {
  switch (run.status) {
    case 'CANCELLED':
      return { status: 'canceled', error: null, logLine: 'Canceled: the workflow was canceled before its last step' };
    case 'TERMINATED': {
      const error = `terminated by an operator: ${run.reason || 'no reason given'}`;
      return { status: 'failed', error, logLine: `Error: ${error}` };
    }
    case 'TIMED_OUT':
      return {
        status: 'failed',
        error: 'the workflow timed out before it finished',
        logLine: 'Error: the workflow timed out before it finished',
      };
    default: {
      const error = `the workflow failed before its last step: ${run.reason || 'no reason given'}`;
      return { status: 'failed', error, logLine: `Error: ${error}` };
    }
  }
}

const seconds = (from: string, to: string) => Math.round(Date.parse(to) - Date.parse(from)) / 1000;

export function createReconcilerActivities({ db, temporal, controlQueue, minAgeMs = 5_000, pageSize = 100, storage }: ReconcilerDeps) {
  const archiveMemory = new ArchiveMemory();
  /** The copy of closed histories under way, and how many the copies since the last look made. */
  let archiving: Promise<void> | undefined;
  let lastArchived = 0;
  /** The closed run's state, replayed from its history by a query; undefined when it cannot be read. */
  async function stateOf<T>(workflowId: string, runId: string, query: string): Promise<T | undefined> {
    try {
      return await temporal.workflow.getHandle(workflowId, runId).query<T>(query);
    } catch (err) {
      log.warn('cannot query a closed workflow; finishing it from its row', { workflowId, error: (err as Error).message });
      return undefined;
    }
  }

  async function sendCompletedWebhook(s: PredictionSnapshot): Promise<void> {
    if (!s.webhook || !s.webhookEventsFilter?.includes('completed')) return;
    // The id the workflow itself would have used: if it did send it, this start is refused.
    const webhookId = webhookWorkflowId(s.id, 'completed', 1);
    const delivery: WebhookDelivery = { webhookId, event: 'completed', url: s.webhook, accountId: s.accountId, snapshot: s };
    try {
      await temporal.workflow.start('webhookDeliveryWorkflow', {
        workflowId: webhookId,
        taskQueue: controlQueue,
        args: [delivery],
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }

  /** Finishes one prediction whose workflow closed early. Returns whether the row was written. */
  async function finishPrediction(row: Parameters<typeof rowToSnapshot>[0], run: ClosedRun): Promise<boolean> {
    const workflowId = predictionWorkflowId(row.id);
    let final: PredictionSnapshot;
    if (run.status === 'COMPLETED') {
      // It finished (its final writes ran, or were lost since): its result is the final state.
      const result = await temporal.workflow
        .getHandle(workflowId, run.runId)
        .result()
        .catch(() => undefined);
      final = (result as PredictionSnapshot | undefined) ?? rowToSnapshot(row);
    } else {
      const state = (await stateOf<PredictionSnapshot>(workflowId, run.runId, 'prediction')) ?? rowToSnapshot(row);
      const outcome = outcomeOf(run);
      const completedAt = run.closeTime.toISOString();
      const metrics: Record<string, number | string> = { ...state.metrics, total_time: seconds(state.createdAt, completedAt) };
      if (state.startedAt) metrics.predict_time ??= seconds(state.startedAt, completedAt);
      final = {
        ...state,
        status: outcome.status,
        error: outcome.error,
        logs: `${state.logs}${outcome.logLine}\n`,
        metrics,
        completedAt,
        // After everything the run wrote, the engine's writes for the attempt it was waiting on
        // included (a late final write of that attempt loses), and after whatever the row holds.
        revision: Math.max(state.revision + ENGINE_REVISIONS, row.revision) + 1,
      };
    }
    // Usage and the slot first, the row last: whoever sees the row finished sees them done too
    // (and a look cut short before the row is written does it all again, changing nothing twice).
    await recordUsage(db, usageOf(final, await versionTask(db, final.versionId), final.startedAt ? 'unknown' : 'none'));
    await release(db, row.id);
    const written = await writePredictionSnapshot(db, final, runWriterOf(temporal, workflowId, run.runId), { replacesEnd: true });
    if (run.status !== 'COMPLETED') await sendCompletedWebhook(final);
    log.info('finished a prediction whose workflow closed early', { predictionId: row.id, close: run.status, status: final.status });
    return written;
  }

  async function finishBatch(row: BatchRow, run: ClosedRun): Promise<boolean> {
    const workflowId = batchWorkflowId(row.id);
    const fromRow: BatchSnapshot = {
      ...row,
      createdAt: row.createdAt.toISOString(),
      startedAt: row.startedAt?.toISOString() ?? null,
      completedAt: row.completedAt?.toISOString() ?? null,
    };
    let final: BatchSnapshot;
    if (run.status === 'COMPLETED') {
      final =
        ((await temporal.workflow
          .getHandle(workflowId, run.runId)
          .result()
          .catch(() => undefined)) as BatchSnapshot | undefined) ?? fromRow;
    } else {
      const state = (await stateOf<BatchSnapshot>(workflowId, run.runId, 'batch')) ?? fromRow;
      const outcome = outcomeOf(run);
      final = {
        ...state,
        status: outcome.status,
        error: outcome.error,
        logs: `${state.logs}${outcome.logLine}\n`,
        completedAt: run.closeTime.toISOString(),
        revision: Math.max(state.revision, row.revision) + 1,
      };
    }
    await release(db, workflowId);
    const written = await writeBatchSnapshot(db, final, runWriterOf(temporal, workflowId, run.runId));
    log.info('finished a batch whose workflow closed early', { batchId: row.id, close: run.status, status: final.status });
    return written;
  }

  /** When the last look that read recent closes began; none yet in this process. */
  let lastLookAt: number | undefined;

  /**
   * Rows whose workflow closed early since the last look and that say otherwise: a terminate
   * that landed after the engine's final write, which wrote `succeeded`, or a row still open
   * (younger than the open rows' pass looks at). A row another run wrote is that run's.
   */
  async function followEarlyCloses(latest: (workflowId: string) => Promise<WorkflowState>): Promise<number> {
    const lookAt = Date.now();
    const since = new Date((lastLookAt ?? lookAt - FIRST_LOOK_BACK_MS) - VISIBILITY_LAG_MS);
    const ids = (await predictionsClosedEarlySince(temporal, since)).map((w) => w.slice(PREDICTION_WORKFLOW_PREFIX.length));
    let finished = 0;
    for (let i = 0; i < ids.length; i += pageSize) {
      for (const row of await predictionRows(db, ids.slice(i, i + pageSize))) {
        const run = await latest(predictionWorkflowId(row.id));
        if (typeof run === 'string' || run.status === 'COMPLETED' || run.status === 'CONTINUED_AS_NEW') continue;
        if (row.status === outcomeOf(run).status) continue;
        const byThisRun = row.runId === run.runId || (row.runId === null && !isTerminalStatus(row.status));
        if (!byThisRun) continue;
        if (await finishPrediction(row, run)) finished += 1;
      }
    }
    lastLookAt = lookAt;
    return finished;
  }

  return {
    /**
     * One look at everything open: rows not in a terminal status and slots still held, each
     * checked against its workflow's latest run. Running ones, and ones Temporal does not know
     * (their history is gone: nothing to finish them from), are left as they are.
     */
    async reconcileClosedWorkflows(): Promise<{ predictions: number; batches: number; slots: number; archived: number }> {
      const olderThan = new Date(Date.now() - minAgeMs);
      const done = { predictions: 0, batches: 0, slots: 0, archived: 0 };
      const seen = new Map<string, Promise<WorkflowState>>();
      const latest = (workflowId: string): Promise<WorkflowState> => {
        let state = seen.get(workflowId);
        if (!state) seen.set(workflowId, (state = latestRun(temporal, workflowId)));
        return state;
      };
      // First: what it finishes is no longer open for the pass below.
      done.predictions += await followEarlyCloses(latest);
      /** Of a page's workflows, the closed ones: one visibility query, then the latest run of each it names. */
      async function closedAmong<R>(rows: R[], workflowIdOf: (r: R) => string): Promise<Array<{ row: R; run: ClosedRun }>> {
        const closed = await withClosedRuns(temporal, rows.map(workflowIdOf));
        const found: Array<{ row: R; run: ClosedRun }> = [];
        for (const row of rows) {
          const workflowId = workflowIdOf(row);
          if (!closed.has(workflowId)) continue;
          // Visibility lists every run: an old run of a reset workflow is closed while its new run goes on.
          const run = await latest(workflowId);
          if (typeof run !== 'string') found.push({ row, run });
        }
        return found;
      }
      for (let page: Awaited<ReturnType<typeof openPredictions>> | undefined; !page || page.next;) {
        page = await openPredictions(db, olderThan, pageSize, page?.next);
        for (const { row, run } of await closedAmong(page.rows, (r) => predictionWorkflowId(r.id))) {
          if (await finishPrediction(row, run)) done.predictions += 1;
        }
      }
      for (let page: Awaited<ReturnType<typeof openBatches>> | undefined; !page || page.next;) {
        page = await openBatches(db, olderThan, pageSize, page?.next);
        for (const { row, run } of await closedAmong(page.rows, (r) => batchWorkflowId(r.id))) {
          if (await finishBatch(row, run)) done.batches += 1;
        }
      }
      // A batch's slot is named after its workflow; a prediction's after the prediction.
      const slotWorkflow = (slot: { id: string }) => (slot.id.startsWith('batch-') ? slot.id : predictionWorkflowId(slot.id));
      for (let page: Awaited<ReturnType<typeof heldSlots>> | undefined; !page || page.next;) {
        page = await heldSlots(db, olderThan, pageSize, page?.next);
        for (const { row: slot, run } of await closedAmong(page.rows, slotWorkflow)) {
          await release(db, slot.id);
          done.slots += 1;
          log.info('released the slot of a closed workflow', { workflowId: slotWorkflow(slot), close: run.status });
        }
      }
      if (storage) {
        // Copying goes on beside the looks, one copy at a time: a burst of closed histories
        // (up to ARCHIVE_BUDGET_MS of copying) never holds up the next look's finishing, which
        // must follow an operator's terminate within seconds. A failed copy is the next one's.
        done.archived = lastArchived;
        lastArchived = 0;
        archiving ??= archiveClosedHistories(temporal, storage, ARCHIVE_BUDGET_MS, archiveMemory)
          .then(
            (r) => void (lastArchived += r.archived),
            (err: Error) => log.warn('archiving closed histories failed', { error: err.message }),
          )
          .finally(() => (archiving = undefined));
      }
      return done;
    },
  };
}
