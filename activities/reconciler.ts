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
import { type Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { release } from '../db/admissions';
import { type BatchRow, writeBatchSnapshot } from '../db/batches';
import type { Db } from '../db/client';
import { rowToSnapshot, writePredictionSnapshot } from '../db/predictions';
import { heldSlots, openBatches, openPredictions, predictionRows, versionTask } from '../db/reconcile';
import { recordUsage, usageOf } from '../db/usage';
import { type BatchSnapshot, batchWorkflowId } from '../domain/batch-contracts';
import { predictionWorkflowId, type WebhookDelivery, webhookWorkflowId } from '../domain/contracts';
import { type PredictionSnapshot } from '../domain/prediction-snapshot';
import { isTerminalStatus } from '../domain/statuses';
import { reconcilerLooks } from '../lib/metrics';
import type { Storage } from '../lib/storage';
import { batchClosedEarly, batchRowToSnapshot, type ClosedRun, outcomeOf, predictionClosedEarly } from './closed-run-outcome';
import { ArchiveMemory, archiveClosedHistories } from './history-archive';
import { lookEvery } from './look-loop';
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

export type { ClosedRun };

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

type Deps = Required<Pick<ReconcilerDeps, 'db' | 'temporal' | 'controlQueue' | 'pageSize'>>;
type LatestRun = (workflowId: string) => Promise<WorkflowState>;

/** The final writes of predictions and batches whose workflow closed early, from their history. */
function closedRunFinishers({ db, temporal, controlQueue }: Omit<Deps, 'pageSize'>) {
  /** The closed run's state, replayed from its history by a query; undefined when it cannot be read. */
  async function stateOf<T>(workflowId: string, runId: string, query: string): Promise<T | undefined> {
    try {
      return await temporal.workflow.getHandle(workflowId, runId).query<T>(query);
    } catch (err) {
      log.warn('cannot query a closed workflow; finishing it from its row', { workflowId, error: (err as Error).message });
      return undefined;
    }
  }

  /** A completed run's result: the final state (its final writes ran, or were lost since). */
  const resultOf = <T>(workflowId: string, runId: string): Promise<T | undefined> =>
    temporal.workflow
      .getHandle(workflowId, runId)
      .result()
      .then((r) => r as T | undefined)
      .catch(() => undefined);

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

  return {
    /** Finishes one prediction whose workflow closed early. Returns whether the row was written. */
    async finishPrediction(row: Parameters<typeof rowToSnapshot>[0], run: ClosedRun): Promise<boolean> {
      const workflowId = predictionWorkflowId(row.id);
      const final =
        run.status === 'COMPLETED'
          ? ((await resultOf<PredictionSnapshot>(workflowId, run.runId)) ?? rowToSnapshot(row))
          : predictionClosedEarly(
              (await stateOf<PredictionSnapshot>(workflowId, run.runId, 'prediction')) ?? rowToSnapshot(row),
              row.revision,
              run,
            );
      // Usage and the slot first, the row last: whoever sees the row finished sees them done too
      // (and a look cut short before the row is written does it all again, changing nothing twice).
      await recordUsage(db, usageOf(final, await versionTask(db, final.versionId), final.startedAt ? 'unknown' : 'none'));
      await release(db, row.id);
      const written = await writePredictionSnapshot(db, final, runWriterOf(temporal, workflowId, run.runId), { replacesEnd: true });
      if (run.status !== 'COMPLETED') await sendCompletedWebhook(final);
      log.info('finished a prediction whose workflow closed early', { predictionId: row.id, close: run.status, status: final.status });
      return written;
    },

    async finishBatch(row: BatchRow, run: ClosedRun): Promise<boolean> {
      const workflowId = batchWorkflowId(row.id);
      const fromRow = batchRowToSnapshot(row);
      const final =
        run.status === 'COMPLETED'
          ? ((await resultOf<BatchSnapshot>(workflowId, run.runId)) ?? fromRow)
          : batchClosedEarly((await stateOf<BatchSnapshot>(workflowId, run.runId, 'batch')) ?? fromRow, row.revision, run);
      await release(db, workflowId);
      const written = await writeBatchSnapshot(db, final, runWriterOf(temporal, workflowId, run.runId));
      log.info('finished a batch whose workflow closed early', { batchId: row.id, close: run.status, status: final.status });
      return written;
    },
  };
}

type Finishers = ReturnType<typeof closedRunFinishers>;

/**
 * Rows whose workflow closed early since the last look and that say otherwise: a terminate
 * that landed after the engine's final write, which wrote `succeeded`, or a row still open
 * (younger than the open rows' pass looks at). A row another run wrote is that run's.
 */
function earlyCloseFollower({ db, temporal, pageSize }: Pick<Deps, 'db' | 'temporal' | 'pageSize'>, finish: Finishers) {
  /** When the last look that read recent closes began; none yet in this process. */
  let lastLookAt: number | undefined;
  return async (latest: LatestRun): Promise<number> => {
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
        if (await finish.finishPrediction(row, run)) finished += 1;
      }
    }
    lastLookAt = lookAt;
    return finished;
  };
}

/**
 * Copying closed histories goes on beside the looks, one copy at a time: a burst of closed
 * histories (up to ARCHIVE_BUDGET_MS of copying) never holds up the next look's finishing, which
 * must follow an operator's terminate within seconds. A failed copy is the next one's. Each call
 * starts a copy unless one is under way, and answers how many the copies since the last call made.
 */
function historyArchiver(temporal: Client, storage: Storage) {
  const archiveMemory = new ArchiveMemory();
  let archiving: Promise<void> | undefined;
  let lastArchived = 0;
  return (): number => {
    const archived = lastArchived;
    lastArchived = 0;
    archiving ??= archiveClosedHistories(temporal, storage, ARCHIVE_BUDGET_MS, archiveMemory)
      .then(
        (r) => void (lastArchived += r.archived),
        (err: Error) => log.warn('archiving closed histories failed', { error: err.message }),
      )
      .finally(() => (archiving = undefined));
    return archived;
  };
}

/** Each workflow's latest run, asked of Temporal once per look. */
function latestRunsOnce(temporal: Client): LatestRun {
  const seen = new Map<string, Promise<WorkflowState>>();
  return (workflowId) => {
    let state = seen.get(workflowId);
    if (!state) seen.set(workflowId, (state = latestRun(temporal, workflowId)));
    return state;
  };
}

/** Of a page's workflows, the closed ones: one visibility query, then the latest run of each it names. */
async function closedAmong<R>(
  temporal: Client,
  latest: LatestRun,
  rows: R[],
  workflowIdOf: (r: R) => string,
): Promise<Array<{ row: R; run: ClosedRun }>> {
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

/** A batch's slot is named after its workflow; a prediction's after the prediction. */
const slotWorkflow = (slot: { id: string }) => (slot.id.startsWith('batch-') ? slot.id : predictionWorkflowId(slot.id));

/** The open rows' and held slots' pass: each page checked against its workflows' latest runs. */
function openRowsPass({ db, temporal, pageSize }: Pick<Deps, 'db' | 'temporal' | 'pageSize'>, finish: Finishers) {
  return async (olderThan: Date, latest: LatestRun) => {
    const done = { predictions: 0, batches: 0, slots: 0 };
    for (let page: Awaited<ReturnType<typeof openPredictions>> | undefined; !page || page.next; ) {
      page = await openPredictions(db, olderThan, pageSize, page?.next);
      for (const { row, run } of await closedAmong(temporal, latest, page.rows, (r) => predictionWorkflowId(r.id))) {
        if (await finish.finishPrediction(row, run)) done.predictions += 1;
      }
    }
    for (let page: Awaited<ReturnType<typeof openBatches>> | undefined; !page || page.next; ) {
      page = await openBatches(db, olderThan, pageSize, page?.next);
      for (const { row, run } of await closedAmong(temporal, latest, page.rows, (r) => batchWorkflowId(r.id))) {
        if (await finish.finishBatch(row, run)) done.batches += 1;
      }
    }
    for (let page: Awaited<ReturnType<typeof heldSlots>> | undefined; !page || page.next; ) {
      page = await heldSlots(db, olderThan, pageSize, page?.next);
      for (const { row: slot, run } of await closedAmong(temporal, latest, page.rows, slotWorkflow)) {
        await release(db, slot.id);
        done.slots += 1;
        log.info('released the slot of a closed workflow', { workflowId: slotWorkflow(slot), close: run.status });
      }
    }
    return done;
  };
}

export function createReconcilerActivities({ db, temporal, controlQueue, minAgeMs = 5_000, pageSize = 100, storage }: ReconcilerDeps) {
  const finish = closedRunFinishers({ db, temporal, controlQueue });
  const followEarlyCloses = earlyCloseFollower({ db, temporal, pageSize }, finish);
  const finishOpenRows = openRowsPass({ db, temporal, pageSize }, finish);
  const archive = storage ? historyArchiver(temporal, storage) : undefined;
  /**
   * One look at everything open: rows not in a terminal status and slots still held, each
   * checked against its workflow's latest run. Running ones, and ones Temporal does not know
   * (their history is gone: nothing to finish them from), are left as they are.
   */
  async function reconcileClosedWorkflows(): Promise<ReconcileLook> {
    reconcilerLooks.inc();
    const olderThan = new Date(Date.now() - minAgeMs);
    const latest = latestRunsOnce(temporal);
    // First: what it finishes is no longer open for the pass below.
    const followed = await followEarlyCloses(latest);
    const done = await finishOpenRows(olderThan, latest);
    return { ...done, predictions: done.predictions + followed, archived: archive ? archive() : 0 };
  }

  return {
    reconcileClosedWorkflows,
    /** The reconciler workflow's looks, `intervalMs` apart, in one activity (./look-loop.ts). */
    async reconcileEvery({ intervalMs, looks }: { intervalMs: number; looks: number }): Promise<void> {
      await lookEvery(
        reconcileClosedWorkflows,
        (done) => {
          if (done.predictions + done.batches + done.slots > 0) log.info('reconciled closed workflows', done);
        },
        { intervalMs, looks, name: 'reconciling' },
      );
    },
  };
}

/** What one look finished: predictions, batches and admission slots, and the histories it began to archive. */
export type ReconcileLook = {
  predictions: number;
  batches: number;
  slots: number;
  archived: number;
};
