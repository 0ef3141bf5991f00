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
import type { PredictionSnapshot } from '../db/predictions';
import type { WebhookEvent } from '../db/schema';
import { NON_RETRYABLE_TYPES } from './failures';
import { ENGINE_REVISIONS, succeededSnapshot } from './engine-projection';
import { describeFailure, isRetryableFault, nodeOfFailure, placeModel, retryDelayMs, retryPolicyOf, warmUp } from './placement';
import { KilnStatus } from './search-attributes';
import {
  modelQueue,
  PREDICTION_STARTED_SIGNAL,
  sessionQueue,
  WEBHOOK_THROTTLE_MS,
  webhookWorkflowId,
  type PredictionArgs,
  type PredictionStartedSignal,
  type PredictionStatus,
  type PredictResult,
} from './types';
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

/** `sessionNode`: a session's prediction goes to that node's session queue, not the model's fair queue. */
function predictOn(versionId: string, priority: PredictionArgs['priority'], sessionNode?: string) {
  return proxyActivities<EngineActivities>({
    taskQueue: sessionNode !== undefined ? sessionQueue(sessionNode) : modelQueue(versionId),
    // Bounds the wait in the fair queue: past it the prediction is placed again (another
    // replica, or a fresh load if the serving node is gone).
    scheduleToStartTimeout: '1 minute',
    startToCloseTimeout: '30 minutes',
    heartbeatTimeout: '10 seconds',
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
 * releases the slot and records usage (workflows/engine-projection.ts); search attributes are
 * set at start and once at the end. Anything off that path (cold start, a failed attempt,
 * cancel, deadline) goes on as before, with local activities.
 */
export const LEAN_HOT_PATH = 'lean-hot-path';

/** x-session-affinity: placement keeps a session on one node and its predictions go to that node's session queue. */
export const SESSION_AFFINITY_PATCH = 'session-affinity';

export async function predictionWorkflow(args: PredictionArgs): Promise<PredictionSnapshot> {
  const state: PredictionSnapshot = {
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
  const logLine = (line: string) => {
    state.logs += `${line}\n`;
  };
  const setStatus = (status: PredictionStatus) => {
    state.status = status;
    upsertSearchAttributes([{ key: KilnStatus, value: status }]);
  };
  /** The state as the projection's next revision: every write carries a newer one. */
  const nextSnapshot = (): PredictionSnapshot => {
    state.revision += 1;
    return { ...state };
  };

  const webhooksSent: Partial<Record<WebhookEvent, { n: number; at: number }>> = {};
  /** Starts the delivery and moves on: the delivery workflow carries on by itself. */
  const webhook = async (event: WebhookEvent) => {
    if (!args.webhook || !args.webhookEventsFilter?.includes(event)) return;
    const last = webhooksSent[event];
    if ((event === 'output' || event === 'logs') && last && Date.now() - last.at < WEBHOOK_THROTTLE_MS) return;
    const n = (last?.n ?? 0) + 1;
    webhooksSent[event] = { n, at: Date.now() };
    const webhookId = webhookWorkflowId(args.id, event, n);
    await startChild(webhookDeliveryWorkflow, {
      workflowId: webhookId,
      args: [{ webhookId, event, url: args.webhook, accountId: args.accountId, snapshot: { ...state } }],
      parentClosePolicy: ParentClosePolicy.ABANDON,
    });
  };

  setHandler(predictionQuery, () => state);
  // The start signal of the current attempt (reset for each placement).
  let started: PredictionStartedSignal | undefined;
  const startSignal = (): PredictionStartedSignal | undefined => started;
  setHandler(predictionStartedSignal, (s) => {
    started ??= s;
  });

  // Goes on beside the first steps: starting the delivery takes a workflow task of its own.
  const startWebhook = webhook('start');

  let result: PredictResult | undefined;
  /** What the last attempt's failure was, and where: the prediction's `error` when it fails. */
  let finalFailure: string | undefined;
  let deadlinePassed = false;
  const work = new CancellationScope();
  if (args.deadline) {
    const deadline = args.deadline;
    // The deadline timer lives outside the work's scope so canceling the work does not cancel it.
    void CancellationScope.cancellable(async () => {
      await sleep(Math.max(0, Date.parse(deadline) - Date.now()));
      if (!result) {
        deadlinePassed = true;
        work.cancel();
      }
    }).catch(() => undefined);
  }

  const lean = args.admitted === true && !args.webhook && patched(LEAN_HOT_PATH);
  const session = args.session !== undefined && patched(SESSION_AFFINITY_PATCH) ? { accountId: args.accountId, session: args.session } : undefined;
  /** What the last attempt was sent: with the engine's result, the final row the engine wrote. */
  let sent: PredictionSnapshot | undefined;

  try {
    await work.run(async () => {
      // The row (the API wrote it already unless it died first), admission and a first placement
      // in one local activity: each one more would cost the workflow another activation.
      let firstPlace = lean ? args.placement : (await Promise.all([admission.beginPrediction({ snapshot: nextSnapshot(), ...(session ? { session } : {}) }), startWebhook]))[0].placement;
      let setupSeconds = 0;
      const retry = retryPolicyOf(args.retry);
      // Nodes where an attempt failed (died, or never took the work): placement avoids them.
      const excludeNodes: string[] = [];
      for (let attempt = 1; !result; attempt++) {
        const place = firstPlace ?? (await placeModel(args.versionId, excludeNodes, session));
        const sessionNode = session ? place.nodeId : undefined;
        firstPlace = undefined;
        let node = place.nodeId;
        try {
          setupSeconds += await warmUp(place, args.model, args.versionId, logLine);
          if (setupSeconds > 0) state.metrics.setup_time = Number(setupSeconds.toFixed(3));
          sent = { ...state, status: 'processing' };
          // The hot path is the first attempt's: a retry goes the way that continues the streamed output.
          if (lean && attempt === 1) {
            try {
              result = await predictOn(args.versionId, args.priority, sessionNode).predict({
                predictionId: args.id,
                versionId: args.versionId,
                task: args.task,
                input: args.input,
                snapshot: sent,
                project: true,
                ...(session ? { session: session.session } : {}),
              });
            } catch (err) {
              node = nodeOfFailure(err) ?? node;
              throw err;
            } finally {
              // The engine may have written revisions up to this many past what it was sent.
              state.revision += ENGINE_REVISIONS;
            }
            continue;
          }
          // A retry continues the output that the failed attempts streamed (one generation for clients).
          const continues = attempt > 1 && patched(CONTINUE_ATTEMPTS_PATCH) ? await control.beginAttempt({ predictionId: args.id, attempt }) : undefined;
          // The engine signals when it really starts; until then the prediction waits in the fair queue.
          started = undefined;
          const running = predictOn(args.versionId, args.priority, sessionNode).predict({
            predictionId: args.id,
            versionId: args.versionId,
            task: args.task,
            input: args.input,
            snapshot: sent,
            attempt,
            ...continues,
            ...(session ? { session: session.session } : {}),
          });
          const markStarted = (async () => {
            await condition(() => startSignal() !== undefined || result !== undefined);
            const signal = startSignal();
            if (signal) node = signal.nodeId;
            // A prediction that already finished goes straight to its final state: no
            // `processing` write to be overwritten a moment later.
            if (signal && state.status === 'starting' && result === undefined) {
              state.startedAt = signal.startedAt;
              setStatus('processing');
              await control.projectPrediction(nextSnapshot());
              await webhook('logs');
            }
          })();
          // A deadline may cancel the wait for the start signal before `running` settles (the
          // engine took the task but has not signaled): handled here so the rejection is not an
          // unhandled one, which fails every workflow task; awaited below as before.
          markStarted.catch(() => undefined);
          result = await running;
          await markStarted;
        } catch (err) {
          if (isCancellation(err)) throw err;
          const outcome = `Attempt ${attempt} failed on node ${node}: ${describeFailure(err)}`;
          if (!isRetryableFault(err) || attempt >= retry.max_attempts) {
            finalFailure = outcome;
            logLine(`${outcome}; ${isRetryableFault(err) ? `no attempts left (max_attempts ${retry.max_attempts})` : 'not retryable'}`);
            throw err;
          }
          excludeNodes.push(node);
          const delay = retryDelayMs(retry, attempt);
          log.warn('attempt failed, placing again', { attempt, node, error: describeFailure(err) });
          logLine(`${outcome}; placing the model again${delay > 0 ? ` in ${delay / 1000} s` : ''}`);
          if (delay > 0) await sleep(delay);
        }
      }
    });
    if (!result) throw new Error('prediction ended without a result');
    const canceled = result.aborted || work.consideredCancelled || CancellationScope.current().consideredCancelled;
    if (result.completedAt && sent && !canceled) {
      // The engine wrote this very state, released the slot and recorded usage: only the search attribute is left.
      Object.assign(state, succeededSnapshot(sent, result, result.completedAt));
      setStatus('succeeded');
      return state;
    }
    state.output = result.output;
    state.startedAt ??= result.startedAt;
    for (const line of result.logs) logLine(line);
    Object.assign(state.metrics, result.metrics);
    if (canceled && deadlinePassed) logLine(`Canceled: the deadline ${args.deadline} passed`);
    setStatus(canceled ? 'canceled' : 'succeeded');
  } catch (err) {
    if (isCancellation(err) && deadlinePassed && !state.startedAt) {
      logLine(`Aborted: the deadline ${args.deadline} passed before the prediction started`);
      setStatus('aborted');
    } else if (isCancellation(err)) {
      if (deadlinePassed) logLine(`Canceled: the deadline ${args.deadline} passed`);
      setStatus('canceled');
    } else {
      setStatus('failed');
      state.error = finalFailure ?? describeFailure(err);
      if (!finalFailure) logLine(`Error: ${state.error}`);
    }
  }
  state.completedAt = new Date(Date.now()).toISOString();
  state.metrics.total_time = seconds(state.createdAt, state.completedAt);
  if (state.startedAt && state.status !== 'succeeded') state.metrics.predict_time ??= seconds(state.startedAt, state.completedAt);
  // The final write, the slot, usage and the completed webhook must happen even when canceled.
  await CancellationScope.nonCancellable(async () => {
    // Independent writes, side by side in one local activity.
    await control.finishPrediction({ snapshot: nextSnapshot(), task: args.task, hardware: result?.hardware ?? 'none' });
    await webhook('completed');
  });
  return state;
}

