/**
 * One prediction, from admission to a terminal status. The workflow holds the prediction's
 * whole state; every transition is projected to Postgres by an activity, so the projection
 * can always be rebuilt from this workflow's history.
 */
import {
  ActivityCancellationType,
  CancellationScope,
  condition,
  defineQuery,
  defineSignal,
  isCancellation,
  log,
  ParentClosePolicy,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  startChild,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { createControlActivities } from '../activities/control';
import type { createEngineActivities } from '../activities/engine';
import {
  modelQueue,
  PREDICTION_STARTED_SIGNAL,
  type PredictionArgs,
  type PredictionStartedSignal,
  type PredictionStatus,
  type PredictResult,
  type PrefillResult,
  sessionQueue,
  WEBHOOK_THROTTLE_MS,
  webhookWorkflowId,
} from '../domain/contracts';
import { ENGINE_REVISIONS, succeededSnapshot } from '../domain/engine-projection';
import { NON_RETRYABLE_TYPES } from '../domain/failures';
import type { PredictionSnapshot } from '../domain/prediction-snapshot';
import { KilnStatus } from '../domain/search-attributes';
import type { WebhookEvent } from '../domain/statuses';
import {
  describeFailure,
  isEngineLoss,
  isRetryableFault,
  nodeOfFailure,
  placeModel,
  retryDelayMs,
  retryPolicyOf,
  warmUp,
} from './placement';
import { PREFILL_SPLIT_PATCH, prefillSplit, type SplitAttempt } from './prefill-split';
import { webhookDeliveryWorkflow } from './webhook-delivery';

type ControlActivities = ReturnType<typeof createControlActivities>;
type EngineActivities = ReturnType<typeof createEngineActivities>;

export const predictionStartedSignal = defineSignal<[PredictionStartedSignal]>(PREDICTION_STARTED_SIGNAL);
export const predictionQuery = defineQuery<PredictionSnapshot>('prediction');

// The cheap control steps (projection, admission, placement, usage) are local activities: they
// run in the control worker next to the workflow, with no task-queue round trip each, which is
// most of what orchestration would otherwise cost. They are still recorded and retried.
const control = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '10 seconds',
  // Projection and admission must eventually happen, even across a long Postgres outage.
  retry: { initialInterval: '200 ms', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

const admission = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '10 seconds',
  // Over the account's cap the prediction waits here: check again soon, but not in a hot loop.
  retry: { initialInterval: '250 ms', backoffCoefficient: 1.5, maximumInterval: '2 seconds', nonRetryableErrorTypes: NON_RETRYABLE_TYPES },
});

/** `sessionNode`: a session's prediction (or a retry) goes to that node's session queue, not the model's fair queue. */
function predictOn(versionId: string, priority: PredictionArgs['priority'], sessionNode?: string, heartbeatTimeout = '10 seconds') {
  return proxyActivities<EngineActivities>({
    taskQueue: sessionNode !== undefined ? sessionQueue(sessionNode) : modelQueue(versionId),
    // Bounds the wait in the fair queue: past it the prediction is placed again (another
    // replica, or a fresh load if the serving node is gone).
    scheduleToStartTimeout: '1 minute',
    startToCloseTimeout: '30 minutes',
    heartbeatTimeout,
    // Wait for the engine to stop, so that a canceled prediction keeps the output it had.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    // No retry on the same queue: the workflow places the work again, avoiding the node that failed.
    retry: { maximumAttempts: 1 },
    priority,
  });
}

/** Retries begin with beginAttempt (a local activity), which histories from before it lack. */
export const CONTINUE_ATTEMPTS_PATCH = 'continue-attempts';

const seconds = (from: string, to: string) => Math.round(Date.parse(to) - Date.parse(from)) / 1000;

/**
 * The hot path (a prediction the API admitted, with no webhook): no local activity and at most
 * two workflow tasks when the version is warm. The API wrote the first row and took the slot in
 * its create transaction and knows a node; the engine writes `processing` and the final row,
 * releases the slot and records usage (domain/engine-projection.ts); search attributes are
 * set at start and once at the end. Anything off that path (cold start, a failed attempt,
 * cancel, deadline) goes on as before, with local activities.
 */
export const LEAN_HOT_PATH = 'lean-hot-path';

/** x-session-affinity: placement keeps a session on one node and its predictions go to that node's session queue. */
export const SESSION_AFFINITY_PATCH = 'session-affinity';

/**
 * A chain's first prediction runs from the model's fair queue like any other, and the engine that
 * runs it records its node as the session's (PredictionArgs.opensSession): the chain's next turns
 * go there. Pinning a session's first turn to a node and a kept sequence cost it the shared prefix
 * that another sequence held, and the unkept ones their choice of sequence.
 */
export const OPENS_SESSION_PATCH = 'opens-session';

/**
 * A dead engine is noticed within ENGINE_HEARTBEAT_TIMEOUT, not 10 s: the engine beats every
 * second whatever it runs (activities/engine.ts), and a killed or lost node's attempt then fails
 * soon enough for the next one to continue its generation at once.
 */
export const PROMPT_ENGINE_LOSS_PATCH = 'prompt-engine-loss';
const ENGINE_HEARTBEAT_TIMEOUT = '2 seconds';

/**
 * A retry goes to the placed node's own queue, not the model's: a node cut off from the network
 * (not killed) still has long polls open on the server until its connections time out, and the
 * server would hand the retry to one of them, the very node the attempt was lost on.
 */
export const RETRY_ON_PLACED_NODE_PATCH = 'retry-on-placed-node';

/**
 * An attempt whose engine was lost (killed, its node gone) is placed again at once, not after the
 * retry policy's delay: the delay spaces out attempts that failed on their own, and the lost
 * attempt's output is waiting to be continued from its KV checkpoint.
 */
export const ENGINE_LOSS_AT_ONCE_PATCH = 'engine-loss-at-once';

/** max_queue_seconds: a timer that aborts the prediction if it has not started by then. */
export const QUEUE_DEADLINE_PATCH = 'queue-deadline';

/**
 * A run with this marker has every patch above (and PREFILL_SPLIT_PATCH) applied, where each
 * applies, with no marker of its own: beside each marker the SDK upserts `TemporalChangeVersion`,
 * which costs Temporal a visibility write, and the hot path took two. Patches added after this one
 * are asked for with `patched()` as usual.
 */
export const EARLIER_PATCHES_IN_ONE = 'earlier-patches-in-one';

/**
 * One prediction's run: admission, then attempts (place, warm up, predict) until one succeeds or
 * none is left, then the final state. Each step is a method; the order of their commands is the
 * order of the recorded histories (test/unit/workflow-replay.test.ts).
 */
export async function predictionWorkflow(args: PredictionArgs): Promise<PredictionSnapshot> {
  const run = new PredictionRun(args);
  run.answerQueriesAndSignals();
  // Goes on beside the first steps: starting the delivery takes a workflow task of its own.
  const startWebhook = run.webhook('start');
  run.armDeadline();
  run.armQueueDeadline();
  run.choosePath();
  run.chooseEngineLossTimeout();
  try {
    await run.work.run(() => run.attempts(startWebhook));
    if (run.endedByEngine()) return run.state;
    run.succeedOrCancel();
  } catch (err) {
    run.fail(err);
  }
  await run.finish();
  return run.state;
}

class PredictionRun {
  readonly state: PredictionSnapshot;
  /** The work's scope: a deadline or a client's cancel cancels it; the final write runs outside it. */
  readonly work = new CancellationScope();
  private webhooksSent: Partial<Record<WebhookEvent, { n: number; at: number }>> = {};
  /** The start signal of the current attempt (reset for each placement). */
  private started: PredictionStartedSignal | undefined;
  private result: PredictResult | undefined;
  /** What the last attempt's failure was, and where: the prediction's `error` when it fails. */
  private finalFailure: string | undefined;
  private deadlinePassed = false;
  private queueDeadlinePassed = false;
  private lean = false;
  private session: { accountId: string; session: string } | undefined;
  /** The session whose node the engine that runs this prediction records (OPENS_SESSION_PATCH). */
  private opensSession: string | undefined;
  /** What the last attempt was sent: with the engine's result, the final row the engine wrote. */
  private sent: PredictionSnapshot | undefined;
  /** The node the current attempt runs on, as far as the workflow knows. */
  private node = '';
  private heartbeatTimeout = '10 seconds';
  /** What a split's prefill node left for this attempt's decode node (workflows/prefill-split.ts). */
  private prefilled: PrefillResult | undefined;
  /** Whether this run carries EARLIER_PATCHES_IN_ONE: decided once, before any other patch is asked for. */
  private readonly earlierPatchesApplied: boolean;

  constructor(private readonly args: PredictionArgs) {
    this.earlierPatchesApplied = patched(EARLIER_PATCHES_IN_ONE);
    this.state = {
      id: args.id,
      accountId: args.accountId,
      model: args.model,
      versionId: args.versionId,
      input: args.input,
      output: null,
      logs: '',
      error: null,
      status: 'starting',
      metrics: {},
      createdAt: args.createdAt,
      startedAt: null,
      completedAt: null,
      webhook: args.webhook,
      webhookEventsFilter: args.webhookEventsFilter,
      deadline: args.deadline,
      revision: 0,
    };
  }

  /** `patched(id)` for a patch that EARLIER_PATCHES_IN_ONE covers: no marker of its own where the run carries that one. */
  private applies(patchId: string): boolean {
    return this.earlierPatchesApplied || patched(patchId);
  }

  private logLine = (line: string) => {
    this.state.logs += `${line}\n`;
  };

  private setStatus(status: PredictionStatus) {
    this.state.status = status;
    upsertSearchAttributes([{ key: KilnStatus, value: status }]);
  }

  /** The state as the projection's next revision: every write carries a newer one. */
  private nextSnapshot(): PredictionSnapshot {
    this.state.revision += 1;
    return { ...this.state };
  }

  /** Starts the delivery and moves on: the delivery workflow carries on by itself. */
  async webhook(event: WebhookEvent): Promise<void> {
    const { args } = this;
    if (!args.webhook || !args.webhookEventsFilter?.includes(event)) return;
    const last = this.webhooksSent[event];
    if ((event === 'output' || event === 'logs') && last && Date.now() - last.at < WEBHOOK_THROTTLE_MS) return;
    const n = (last?.n ?? 0) + 1;
    this.webhooksSent[event] = { n, at: Date.now() };
    const webhookId = webhookWorkflowId(args.id, event, n);
    await startChild(webhookDeliveryWorkflow, {
      workflowId: webhookId,
      args: [{ webhookId, event, url: args.webhook, accountId: args.accountId, snapshot: { ...this.state } }],
      parentClosePolicy: ParentClosePolicy.ABANDON,
    });
  }

  answerQueriesAndSignals(): void {
    setHandler(predictionQuery, () => this.state);
    setHandler(predictionStartedSignal, (s) => {
      this.started ??= s;
    });
  }

  /** The deadline timer lives outside the work's scope, so canceling the work does not cancel it. */
  armDeadline(): void {
    const deadline = this.args.deadline;
    if (!deadline) return;
    void CancellationScope.cancellable(async () => {
      await sleep(Math.max(0, Date.parse(deadline) - Date.now()));
      if (!this.result) {
        this.deadlinePassed = true;
        this.work.cancel();
      }
    }).catch(() => undefined);
  }

  /**
   * max_queue_seconds: not started by then (still waiting, warming up or in the model's queue),
   * the work is canceled and the prediction ends `aborted`. Its start comes by signal, which only
   * the queued path has: a prediction with a queue deadline takes that path.
   */
  armQueueDeadline(): void {
    const queueDeadline = this.args.queueDeadline;
    if (!queueDeadline || !this.applies(QUEUE_DEADLINE_PATCH)) return;
    void CancellationScope.cancellable(async () => {
      await sleep(Math.max(0, Date.parse(queueDeadline) - Date.now()));
      // startedAt: an attempt that started and failed counts; its retry is not waiting in a queue.
      if (!this.started && !this.result && this.state.startedAt === null) {
        this.queueDeadlinePassed = true;
        this.work.cancel();
      }
    }).catch(() => undefined);
  }

  /** The hot path, and a session's own queue: both patched in, each where it applies. */
  choosePath(): void {
    const { args } = this;
    this.lean = args.admitted === true && !args.webhook && !args.queueDeadline && this.applies(LEAN_HOT_PATH);
    this.session =
      args.session !== undefined && this.applies(SESSION_AFFINITY_PATCH) ? { accountId: args.accountId, session: args.session } : undefined;
    this.opensSession = args.opensSession !== undefined && this.applies(OPENS_SESSION_PATCH) ? args.opensSession : undefined;
  }

  /** How long a silent engine has before its attempt is given up for lost (histories from before the patch: 10 s). */
  chooseEngineLossTimeout(): void {
    this.heartbeatTimeout = this.applies(PROMPT_ENGINE_LOSS_PATCH) ? ENGINE_HEARTBEAT_TIMEOUT : '10 seconds';
  }

  /** Admission, then attempts until one gives a result; a failure with no attempt left is thrown. */
  async attempts(startWebhook: Promise<void>): Promise<void> {
    const { args, session } = this;
    // The row (the API wrote it already unless it died first), admission and a first placement
    // in one local activity: each one more would cost the workflow another activation.
    let firstPlace = this.lean
      ? args.placement
      : (
          await Promise.all([admission.beginPrediction({ snapshot: this.nextSnapshot(), ...(session ? { session } : {}) }), startWebhook])
        )[0].placement;
    let setupSeconds = 0;
    const retry = retryPolicyOf(args.retry);
    // Nodes where an attempt failed (died, or never took the work): placement avoids them.
    const excludeNodes: string[] = [];
    for (let attempt = 1; !this.result; attempt++) {
      const split = attempt === 1 ? await this.splitPrefill() : undefined;
      const place = split?.decode ?? firstPlace ?? (await placeModel(args.versionId, excludeNodes, session));
      // A split's decode step and a retry go to the node's own queue, as a session's predictions do.
      const ownQueueNode = session || split || (attempt > 1 && this.applies(RETRY_ON_PLACED_NODE_PATCH)) ? place.nodeId : undefined;
      firstPlace = undefined;
      this.node = place.nodeId;
      this.prefilled = split?.prefilled;
      try {
        setupSeconds += (split?.setupSeconds ?? 0) + (await warmUp(place, args.model, args.versionId, this.logLine));
        if (setupSeconds > 0) this.state.metrics.setup_time = Number(setupSeconds.toFixed(3));
        this.sent = { ...this.state, status: 'processing' };
        // The hot path is the first attempt's: a retry goes the way that continues the streamed output.
        if (this.lean && attempt === 1) await this.leanAttempt(this.sent, ownQueueNode);
        else await this.queuedAttempt(this.sent, attempt, ownQueueNode);
      } catch (err) {
        if (isCancellation(err)) throw err;
        const delay = this.attemptFailed(err, attempt, retry);
        excludeNodes.push(this.node);
        if (delay > 0) await sleep(delay);
      }
    }
  }

  /** A long prompt's prefill on a `prefill` node (workflows/prefill-split.ts), where the API marked it long and a split is placed. */
  private async splitPrefill(): Promise<SplitAttempt | undefined> {
    const { args } = this;
    if (!args.longPrompt || args.session !== undefined || !this.applies(PREFILL_SPLIT_PATCH)) return undefined;
    return prefillSplit(args, this.logLine);
  }

  /** The engine writes `processing` and the final row itself; the workflow only waits for it. */
  private async leanAttempt(sent: PredictionSnapshot, sessionNode: string | undefined): Promise<void> {
    const { args, session } = this;
    try {
      this.result = await predictOn(args.versionId, args.priority, sessionNode, this.heartbeatTimeout).predict({
        predictionId: args.id,
        versionId: args.versionId,
        task: args.task,
        input: args.input,
        snapshot: sent,
        project: true,
        ...(session ? { session: session.session } : {}),
        ...(this.opensSession !== undefined ? { opensSession: this.opensSession } : {}),
        ...(this.prefilled ? { prefilled: this.prefilled } : {}),
      });
    } catch (err) {
      this.node = nodeOfFailure(err) ?? this.node;
      throw err;
    } finally {
      // The engine may have written revisions up to this many past what it was sent.
      this.state.revision += ENGINE_REVISIONS;
    }
  }

  /** Waits in the model's fair queue; `processing` is written when the engine signals its start. */
  private async queuedAttempt(sent: PredictionSnapshot, attempt: number, sessionNode: string | undefined): Promise<void> {
    const { args, session } = this;
    // A retry continues the output that the failed attempts streamed (one generation for clients).
    const continues =
      attempt > 1 && this.applies(CONTINUE_ATTEMPTS_PATCH) ? await control.beginAttempt({ predictionId: args.id, attempt }) : undefined;
    // The engine signals when it really starts; until then the prediction waits in the fair queue.
    this.started = undefined;
    const running = predictOn(args.versionId, args.priority, sessionNode, this.heartbeatTimeout).predict({
      predictionId: args.id,
      versionId: args.versionId,
      task: args.task,
      input: args.input,
      snapshot: sent,
      attempt,
      ...continues,
      ...(session ? { session: session.session } : {}),
      ...(this.opensSession !== undefined ? { opensSession: this.opensSession } : {}),
      ...(this.prefilled ? { prefilled: this.prefilled } : {}),
    });
    const markStarted = this.markStarted();
    // A deadline may cancel the wait for the start signal before `running` settles (the
    // engine took the task but has not signaled): handled here so the rejection is not an
    // unhandled one, which fails every workflow task; awaited below as before.
    markStarted.catch(() => undefined);
    this.result = await running;
    await markStarted;
  }

  private async markStarted(): Promise<void> {
    await condition(() => this.started !== undefined || this.result !== undefined);
    const signal = this.started;
    if (signal) this.node = signal.nodeId;
    // A prediction that already finished goes straight to its final state: no
    // `processing` write to be overwritten a moment later.
    if (signal && this.state.status === 'starting' && this.result === undefined) {
      this.state.startedAt = signal.startedAt;
      this.setStatus('processing');
      await control.projectPrediction(this.nextSnapshot());
      await this.webhook('logs');
    }
  }

  /** Logs the failed attempt; throws when it was the last one (or not retryable), else gives the wait before the next. */
  private attemptFailed(err: unknown, attempt: number, retry: ReturnType<typeof retryPolicyOf>): number {
    const outcome = `Attempt ${attempt} failed on node ${this.node}: ${describeFailure(err)}`;
    if (!isRetryableFault(err) || attempt >= retry.max_attempts) {
      this.finalFailure = outcome;
      this.logLine(`${outcome}; ${isRetryableFault(err) ? `no attempts left (max_attempts ${retry.max_attempts})` : 'not retryable'}`);
      throw err;
    }
    const atOnce = isEngineLoss(err) && this.applies(ENGINE_LOSS_AT_ONCE_PATCH);
    const delay = atOnce ? 0 : retryDelayMs(retry, attempt);
    log.warn('attempt failed, placing again', { attempt, node: this.node, error: describeFailure(err) });
    const when = atOnce ? ' at once (the engine was lost)' : delay > 0 ? ` in ${delay / 1000} s` : '';
    this.logLine(`${outcome}; placing the model again${when}`);
    return delay;
  }

  private get canceled(): boolean {
    return this.result?.aborted === true || this.work.consideredCancelled || CancellationScope.current().consideredCancelled;
  }

  /** On the hot path the engine wrote this very state, released the slot and recorded usage: only the search attribute is left. */
  endedByEngine(): boolean {
    if (!this.result) throw new Error('prediction ended without a result');
    const { result, sent } = this;
    if (!(result.completedAt && sent && !this.canceled)) return false;
    Object.assign(this.state, succeededSnapshot(sent, result, result.completedAt));
    this.setStatus('succeeded');
    return true;
  }

  succeedOrCancel(): void {
    const result = this.result!;
    const canceled = this.canceled;
    this.state.output = result.output;
    this.state.startedAt ??= result.startedAt;
    for (const line of result.logs) this.logLine(line);
    Object.assign(this.state.metrics, result.metrics);
    if (canceled && this.deadlinePassed) this.logLine(`Canceled: the deadline ${this.args.deadline} passed`);
    this.setStatus(canceled ? 'canceled' : 'succeeded');
  }

  fail(err: unknown): void {
    const { deadline, queueDeadline } = this.args;
    if (isCancellation(err) && this.queueDeadlinePassed && !this.state.startedAt) {
      this.logLine(`Aborted: not started by ${queueDeadline} (max_queue_seconds)`);
      this.setStatus('aborted');
    } else if (isCancellation(err) && this.deadlinePassed && !this.state.startedAt) {
      this.logLine(`Aborted: the deadline ${deadline} passed before the prediction started`);
      this.setStatus('aborted');
    } else if (isCancellation(err)) {
      if (this.deadlinePassed) this.logLine(`Canceled: the deadline ${deadline} passed`);
      this.setStatus('canceled');
    } else {
      this.setStatus('failed');
      this.state.error = this.finalFailure ?? describeFailure(err);
      if (!this.finalFailure) this.logLine(`Error: ${this.state.error}`);
    }
  }

  /** The final write, the slot, usage and the completed webhook: they must happen even when canceled. */
  async finish(): Promise<void> {
    const { state } = this;
    state.completedAt = new Date(Date.now()).toISOString();
    state.metrics.total_time = seconds(state.createdAt, state.completedAt);
    if (state.startedAt && state.status !== 'succeeded') state.metrics.predict_time ??= seconds(state.startedAt, state.completedAt);
    await CancellationScope.nonCancellable(async () => {
      // Independent writes, side by side in one local activity.
      await control.finishPrediction({ snapshot: this.nextSnapshot(), task: this.args.task, hardware: this.result?.hardware ?? 'none' });
      await this.webhook('completed');
    });
  }
}
