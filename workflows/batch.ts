/**
 * A batch: many inputs for one model version, run in chunks on the model's queue at batch
 * priority. The workflow holds the progress: which chunks are done (their results are part
 * objects in storage) and, for a chunk whose attempt failed, the checkpoint its heartbeats
 * carried, so the next attempt, placed like a prediction's, resumes there. Large batches
 * continue as new every `chunksPerRun` chunks so that no run's history grows without bound.
 */
import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  continueAsNew,
  defineQuery,
  isCancellation,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  TimeoutFailure,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { createBatchControlActivities } from '../activities/batch-control';
import type { createControlActivities } from '../activities/control';
import type { createEngineActivities } from '../activities/engine';
import type { BatchSnapshot } from '../domain/batch-contracts';
import {
  type BatchArgs,
  type BatchCarry,
  type ChunkProgress,
  type ChunkResult,
  chunkProgressOf,
  furthest,
  type RerunPlan,
} from '../domain/batch-contracts';
import { modelQueue, type Placement } from '../domain/contracts';
import { kilnFailure, NON_RETRYABLE_TYPES } from '../domain/failures';
import { KilnStatus } from '../domain/search-attributes';
import type { BatchStatus } from '../domain/statuses';
import { describeFailure, isRetryableFault, placeModel, retryDelayMs, retryPolicyOf, warmUp } from './placement';

type ControlActivities = ReturnType<typeof createControlActivities>;
type BatchControlActivities = ReturnType<typeof createBatchControlActivities>;
type EngineActivities = ReturnType<typeof createEngineActivities>;

export const batchQuery = defineQuery<BatchSnapshot>('batch');

/** Schedule-to-start timeouts (no node took a chunk in time) a batch sits through before it gives up. */
const MAX_QUEUE_TIMEOUTS = 20;
/** The batch's logs keep their last lines only: a long batch with many failures must not grow its state without bound. */
const MAX_LOG_CHARS = 32_000;

const control = proxyLocalActivities<ControlActivities & BatchControlActivities>({
  startToCloseTimeout: '10 seconds',
  // Projection must eventually happen, even across a long Postgres outage.
  retry: { initialInterval: '200 ms', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

const admission = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '250 ms', backoffCoefficient: 1.5, maximumInterval: '2 seconds', nonRetryableErrorTypes: NON_RETRYABLE_TYPES },
});

/** Reads every part: a real activity on the control queue, heartbeating, since outputs can be large. */
const assembly = proxyActivities<BatchControlActivities>({
  startToCloseTimeout: '1 hour',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

function chunkOn(versionId: string, priority: BatchArgs['priority']) {
  return proxyActivities<EngineActivities>({
    taskQueue: modelQueue(versionId),
    // Batch work waits behind interactive work in the fair queue; past this it is placed again.
    scheduleToStartTimeout: '2 minutes',
    startToCloseTimeout: '6 hours',
    heartbeatTimeout: '10 seconds',
    // Let a canceled chunk write the items it finished.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    // No retry on the same queue: the workflow places the chunk again, with its checkpoint.
    retry: { maximumAttempts: 1 },
    priority,
  });
}

/** The checkpoint an attempt left: its last heartbeat (timeouts) or the details of its failure. */
function progressLeftBy(err: unknown, chunk: number): ChunkProgress | undefined {
  if (!(err instanceof ActivityFailure)) return undefined;
  if (err.cause instanceof TimeoutFailure) return chunkProgressOf(err.cause.lastHeartbeatDetails, chunk);
  if (err.cause instanceof ApplicationFailure) return chunkProgressOf(err.cause.details?.[0], chunk);
  return undefined;
}

const isQueueTimeout = (err: unknown) =>
  err instanceof ActivityFailure && err.cause instanceof TimeoutFailure && err.cause.timeoutType === 'SCHEDULE_TO_START';

/**
 * The parts a retry's output is made of: every chunk has one, but for the chunks that had none
 * (they never ran) and that this retry has not run yet.
 */
function rerunOutput(plan: RerunPlan, chunksBelow: number, complete: boolean, runStart: number, written: number[]) {
  if (complete) return { chunksBelow, extraChunks: [], skipChunks: [] };
  const ranBefore = new Set(plan.chunks.slice(0, runStart));
  return { chunksBelow, extraChunks: [], skipChunks: plan.missing.filter((c) => !ranBefore.has(c) && !written.includes(c)) };
}

/**
 * A batch's run: a retry's plan, admission, chunks in parallel lanes (each chunk placed and retried
 * like a prediction, resuming from its checkpoint), then continue-as-new or the output file and the
 * final state. Each step is a method; the order of their commands is the order of the recorded
 * histories (test/unit/workflow-replay.test.ts).
 */
export async function batchWorkflow(args: BatchArgs, carry?: BatchCarry): Promise<BatchSnapshot> {
  const run = new BatchRun(args, carry);
  run.answerQueries();
  run.showProgress();
  await run.planRerun();
  await run.runChunks();
  if (run.moreToDo()) await run.continueAsNew();
  await run.finish();
  return run.state;
}

class BatchRun {
  readonly state: BatchSnapshot;
  private readonly chunks: number;
  /** Lanes that place a cold model at once share one warm-up (the engine would share the load anyway). */
  private warming = new Map<string, Promise<number>>();
  private readonly retry: ReturnType<typeof retryPolicyOf>;
  /** Nodes where a chunk failed: placement tries others first, for the rest of this run. */
  private excludeNodes: string[] = [];
  private queueTimeouts = 0;
  /** A retry's plan: which chunks hold items to redo (the others keep their parts). */
  private rerun: RerunPlan | undefined;
  private readonly runStart: number;
  private next: number;
  /** Chunks of this run whose part is written (all of them, or only the finished items of a canceled one). */
  private written: number[] = [];
  private failure: unknown;
  private canceled = false;

  constructor(
    private readonly args: BatchArgs,
    private readonly carry?: BatchCarry,
  ) {
    this.chunks = Math.ceil(args.total / args.chunkSize);
    this.state = {
      id: args.id,
      accountId: args.accountId,
      model: args.model,
      versionId: args.versionId,
      status: carry ? 'processing' : 'starting',
      total: args.total,
      completed: carry?.completed ?? 0,
      failed: carry?.failed ?? 0,
      chunkSize: args.chunkSize,
      source: args.source,
      error: null,
      logs: carry?.logs ?? '',
      outputFileId: null,
      createdAt: args.createdAt,
      startedAt: carry?.startedAt ?? null,
      completedAt: null,
      revision: carry?.revision ?? 0,
      // Only a retry writes it: a first attempt's row keeps the column's default (1).
      ...(args.rerun ? { attempt: args.rerun.attempt } : {}),
    };
    this.retry = retryPolicyOf(args.retry);
    this.rerun = carry?.rerun;
    this.runStart = carry?.nextChunk ?? 0;
    this.next = this.runStart;
  }

  private logLine = (line: string) => {
    const { state } = this;
    state.logs += `${line}\n`;
    if (state.logs.length > MAX_LOG_CHARS) state.logs = state.logs.slice(state.logs.indexOf('\n', state.logs.length - MAX_LOG_CHARS) + 1);
  };

  private setStatus(status: BatchStatus) {
    this.state.status = status;
    upsertSearchAttributes([{ key: KilnStatus, value: status }]);
  }

  private async project() {
    this.state.revision += 1;
    await control.projectBatch({ ...this.state });
  }

  answerQueries(): void {
    setHandler(batchQuery, () => this.state);
  }

  showProgress(): void {
    const { state } = this;
    const done = state.completed + state.failed;
    setCurrentDetails(`${done} of ${state.total} items done (${state.failed} failed), chunk size ${state.chunkSize}`);
    upsertMemo({ completed: state.completed, failed: state.failed });
  }

  private warmOnce(place: Placement): Promise<number> {
    if (place.warm) return Promise.resolve(0);
    let pending = this.warming.get(place.nodeId);
    if (!pending) {
      pending = warmUp(place, this.args.model, this.args.versionId, this.logLine).finally(() => this.warming.delete(place.nodeId));
      this.warming.set(place.nodeId, pending);
    }
    return pending;
  }

  /** A retry plans its work first (its first run only: a continued run carries the plan). */
  async planRerun(): Promise<void> {
    const { args } = this;
    if (args.rerun && !this.carry && patched('batch-rerun')) {
      this.rerun = await assembly.planBatchRerun({ batchId: args.id, total: args.total, chunkSize: args.chunkSize });
      this.state.completed = this.rerun.completed;
      this.state.failed = this.rerun.failed;
    }
  }

  /** Positions run through the chunks to do: all of them, or a retry's. */
  private chunkAt(position: number): number {
    return this.rerun ? this.rerun.chunks[position] : position;
  }

  private get positions(): number {
    return this.rerun ? this.rerun.chunks.length : this.chunks;
  }

  /** Admission (a first run only), then this run's share of the chunks in parallel lanes. */
  async runChunks(): Promise<void> {
    const work = new CancellationScope();
    try {
      await work.run(async () => {
        if (!this.carry) await this.admit();
        await Promise.all(Array.from({ length: Math.max(1, this.args.parallelism) }, () => this.lane()));
      });
    } catch (err) {
      if (isCancellation(err)) this.canceled = true;
      else this.failure ??= err;
    }
    this.canceled ||= work.consideredCancelled;
  }

  /** A batch holds one of its account's admission slots while it runs, like a prediction. */
  private async admit(): Promise<void> {
    const { args, state, rerun } = this;
    await admission.admitPrediction({ predictionId: `batch-${args.id}`, accountId: args.accountId, versionId: args.versionId });
    state.startedAt = new Date(Date.now()).toISOString();
    this.setStatus('processing');
    this.logLine(
      rerun
        ? `Attempt ${args.rerun!.attempt}: running the failed and unfinished items of ${rerun.chunks.length} of ${this.chunks} chunks again, ${args.parallelism} at a time`
        : `Running ${args.total} inputs in ${this.chunks} chunks of up to ${args.chunkSize}, ${args.parallelism} at a time`,
    );
    await this.project();
  }

  private async lane(): Promise<void> {
    const runEnd = Math.min(this.positions, this.runStart + this.args.chunksPerRun);
    while (this.next < runEnd && this.failure === undefined && !this.canceled && !workflowInfo().continueAsNewSuggested) {
      const chunk = this.chunkAt(this.next++);
      try {
        const r = await this.runChunk(chunk);
        this.written.push(chunk);
        this.state.completed += r.completed;
        this.state.failed += r.failed;
        this.showProgress();
        if (r.canceled) this.canceled = true;
        else await this.project();
      } catch (err) {
        if (isCancellation(err)) this.canceled = true;
        else this.failure ??= err;
      }
    }
  }

  /** One chunk, placed and attempted until it succeeds or has no attempt left; each attempt resumes from the furthest checkpoint. */
  private async runChunk(chunk: number): Promise<ChunkResult> {
    const { args, retry, excludeNodes } = this;
    const first = chunk * args.chunkSize;
    const count = Math.min(args.chunkSize, args.total - first);
    let resume: ChunkProgress | undefined;
    for (let attempt = 1; ; attempt++) {
      const place = await placeModel(args.versionId, excludeNodes);
      try {
        await this.warmOnce(place);
        return await chunkOn(args.versionId, args.priority).runBatchChunk({
          batchId: args.id,
          accountId: args.accountId,
          versionId: args.versionId,
          task: args.task,
          chunk,
          first,
          count,
          resume,
          ...(args.rerun ? { rerunAttempt: args.rerun.attempt } : {}),
        });
      } catch (err) {
        if (isCancellation(err)) throw err;
        resume = furthest(resume, progressLeftBy(err, chunk));
        const node = resume?.node ?? place.nodeId;
        const outcome = `Chunk ${chunk} (items ${first}–${first + count - 1}) attempt ${attempt} failed on node ${node}: ${describeFailure(err)}`;
        // Waiting in the queue is not the chunk's fault: it does not use up an attempt.
        const queueWait = isQueueTimeout(err) && ++this.queueTimeouts <= MAX_QUEUE_TIMEOUTS;
        if (queueWait) attempt -= 1;
        if (!isRetryableFault(err) || attempt >= retry.max_attempts) {
          this.logLine(`${outcome}; ${isRetryableFault(err) ? `no attempts left (max_attempts ${retry.max_attempts})` : 'not retryable'}`);
          throw kilnFailure('BatchChunkFailed', outcome);
        }
        if (!excludeNodes.includes(node)) excludeNodes.push(node);
        const delay = queueWait ? 0 : retryDelayMs(retry, attempt);
        const from = resume
          ? `resuming from item ${first + resume.lines.length} (${resume.lines.length} of ${count} done)`
          : 'starting it again';
        log.warn('batch chunk failed, placing again', { chunk, attempt, node, error: describeFailure(err) });
        this.logLine(`${outcome}; ${from}${delay > 0 ? ` in ${delay / 1000} s` : ''}`);
        await this.project();
        if (delay > 0) await sleep(delay);
      }
    }
  }

  /** Chunks are left and nothing failed or was canceled: the next run takes them. */
  moreToDo(): boolean {
    return !this.canceled && this.failure === undefined && this.next < this.positions;
  }

  async continueAsNew(): Promise<never> {
    const { state, carry, rerun } = this;
    return continueAsNew<typeof batchWorkflow>(this.args, {
      nextChunk: this.next,
      completed: state.completed,
      failed: state.failed,
      revision: state.revision,
      startedAt: state.startedAt,
      logs: state.logs,
      runs: (carry?.runs ?? 1) + 1,
      ...(rerun ? { rerun } : {}),
    });
  }

  /** The output, the final write and the slot: they must happen even when canceled. */
  async finish(): Promise<void> {
    const { args, state, rerun, written, runStart, chunks, canceled, failure } = this;
    await CancellationScope.nonCancellable(async () => {
      const complete = !canceled && failure === undefined;
      if (written.length > 0 || runStart > 0 || rerun) {
        const out = await assembly.assembleBatchOutput({
          batchId: args.id,
          accountId: args.accountId,
          ...(rerun
            ? rerunOutput(rerun, chunks, complete, runStart, written)
            : { chunksBelow: complete ? chunks : runStart, extraChunks: complete ? [] : written }),
        });
        state.outputFileId = out.fileId;
        this.logLine(`Wrote ${out.lines} result lines (${out.size} bytes) to file ${out.fileId}`);
      }
      if (canceled) {
        this.logLine(`Canceled after ${state.completed + state.failed} of ${state.total} items`);
        this.setStatus('canceled');
      } else if (failure !== undefined) {
        state.error = describeFailure(failure);
        this.setStatus('failed');
      } else {
        this.setStatus('succeeded');
      }
      state.completedAt = new Date(Date.now()).toISOString();
      await control.releaseAdmission({ predictionId: `batch-${args.id}` });
      await this.project();
    });
  }
}
