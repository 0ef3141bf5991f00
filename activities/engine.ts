/** Activities of an engine node: warm a model up, and run predictions on it. */
import { Context, log } from '@temporalio/activity';
import type { Db } from '../db/client';
import { finishSucceededPrediction, type RunWriter, writePredictionSnapshot } from '../db/predictions';
import { recordSessionNode } from '../db/session-affinity';
import { usageOf } from '../db/usage';
import {
  PREDICTION_STARTED_SIGNAL,
  type PredictionStartedSignal,
  type PredictRequest,
  type PredictResult,
  predictionWorkflowId,
} from '../domain/contracts';
import { processingSnapshot, succeededSnapshot } from '../domain/engine-projection';
import { observePrediction } from '../lib/metrics';
import { createBatchChunkActivities } from './batch-chunk';
import type { EngineDeps } from './engine-deps';
import { mappingEngineErrors } from './engine-failures';
import { createModelLoader } from './model-load';
import { createPrefillActivities } from './prefill';
import { currentRunWriter } from './run-writer';
import { runTask } from './task-runners';

/** How long a prediction runs before its workflow hears that it started (see `predict`). */
export const START_ANNOUNCE_DELAY_MS = 100;

export function createEngineActivities(deps: EngineDeps) {
  const { db, node } = deps;
  const { loadModel } = createModelLoader(deps);
  const runPrediction = mappingEngineErrors(runTask);

  return {
    ...createBatchChunkActivities({
      storage: deps.storage,
      nodeId: node.nodeId,
      async runItem(req, ctx, heartbeat) {
        const done = node.begin(req.versionId);
        try {
          return await runPrediction(deps, req, ctx, new Date().toISOString(), 0, { live: false, heartbeat });
        } finally {
          done();
        }
      },
    }),

    loadModel: mappingEngineErrors(loadModel),

    ...createPrefillActivities(deps),

    async predict(req: PredictRequest): Promise<PredictResult> {
      const ctx = Context.current();
      const startedAt = new Date().toISOString();
      // Time in the model's fair queue: from this attempt's scheduling to an engine taking it.
      const queueSeconds = Math.max(0, Date.now() - ctx.info.currentAttemptScheduledTimestampMs) / 1000;
      const done = node.begin(req.versionId);
      const untrack = deps.inflight?.track(ctx.info.taskToken, req.predictionId);
      // The hot path's writes are the workflow run's: after an operator's reset, an old run's lose.
      const writer = req.project ? currentRunWriter(ctx.client) : undefined;
      const announcement = announceStart(deps, ctx, req, startedAt, writer);
      // Heartbeats name the node: a workflow whose attempt timed out knows which node to avoid.
      let lastDetails: object = {};
      const heartbeat = (details: unknown) => {
        lastDetails = details as object;
        ctx.heartbeat({ ...lastDetails, nodeId: node.nodeId });
      };
      // Whatever the task does, a beat at least this often: the workflow gives a silent engine up
      // for lost after a couple of seconds (workflows/prediction.ts PROMPT_ENGINE_LOSS_PATCH).
      const alive = setInterval(() => heartbeat(lastDetails), LIVENESS_BEAT_MS);
      // The node is named as soon as the prediction shows as started: an engine lost in its first
      // beat's interval would otherwise be blamed on the node the API placed it on, when any node
      // serving the version may have taken it from the model's queue. A shorter one sends no beat.
      const named = setTimeout(() => heartbeat(lastDetails), START_ANNOUNCE_DELAY_MS);
      try {
        const result = await runPrediction(deps, req, ctx, startedAt, queueSeconds, { live: true, heartbeat });
        announcement.cancel();
        // Before the final row: the chain's next turn, which waits for it, finds the session's node.
        if (req.opensSession !== undefined && !result.aborted) await openSession(db, req, node.nodeId);
        if (!req.project || result.aborted) return result;
        // The workflow was canceled, terminated or reset while the engine ran (its heartbeat
        // said so): the final row is the workflow's, or the reconciler's, to write.
        if (ctx.cancellationSignal.aborted) return result;
        await announcement.written();
        return await projectSucceeded(db, req, result, writer);
      } finally {
        clearInterval(alive);
        clearTimeout(named);
        announcement.cancel();
        untrack?.();
        done();
      }
    },
  };
}

/**
 * Records this node as the session's that the prediction opens (PredictRequest.opensSession).
 * Best effort: without it, the chain's next turn is placed on any node serving the version.
 */
async function openSession(db: Db, req: PredictRequest, nodeId: string): Promise<void> {
  const key = { accountId: req.snapshot.accountId, session: req.opensSession!, versionId: req.versionId };
  await recordSessionNode(db, key, nodeId).catch((err: Error) => log.warn('could not record the session node', { error: err.message }));
}

/**
 * How often a running prediction heartbeats at least: two beats fit in the workflow's 2 s heartbeat
 * timeout, so an event loop may stall for a second before a healthy engine is given up for lost.
 * Each beat is a write of the workflow's state in Temporal: at 500 ms they were most of Temporal's
 * CPU beside 16 streams, and on two cores every millisecond of it is taken from llama.cpp on both
 * (docs/benchmarks.md, batched generation).
 */
const LIVENESS_BEAT_MS = 1000;

/**
 * Only a prediction still running after a moment is shown as started: a short one goes straight
 * to its final state, which spares a projection write (and, where the workflow projects, a
 * workflow task and a search attribute update). Best effort: the result carries the start too.
 */
function announceStart(deps: EngineDeps, ctx: Context, req: PredictRequest, startedAt: string, writer: RunWriter | undefined) {
  let processing: Promise<unknown> | undefined;
  const timer = setTimeout(() => {
    if (req.project) {
      processing = writePredictionSnapshot(deps.db, processingSnapshot(req.snapshot, startedAt), writer, { existing: true }).catch(
        (err: Error) => log.warn('could not write processing', { error: err.message }),
      );
      return;
    }
    const started: PredictionStartedSignal = { startedAt, nodeId: deps.node.nodeId };
    ctx.client.workflow
      .getHandle(predictionWorkflowId(req.predictionId))
      .signal(PREDICTION_STARTED_SIGNAL, started)
      .catch((err: Error) => log.warn('could not signal start', { error: err.message }));
  }, START_ANNOUNCE_DELAY_MS);
  return {
    cancel: () => clearTimeout(timer),
    /** The `processing` row's write, where one was started: the final row comes after it. */
    written: () => processing,
  };
}

/**
 * The hot path's last writes, in one transaction: the final row (and its stream events), the
 * admission slot released, usage recorded. The result then carries completed_at, and the
 * workflow ends without a write of its own. A write that fails or is overtaken (the workflow
 * canceled and wrote a later revision) leaves the result as it is: the workflow finishes it.
 */
async function projectSucceeded(db: Db, req: PredictRequest, result: PredictResult, writer: RunWriter | undefined): Promise<PredictResult> {
  const completedAt = new Date().toISOString();
  const final = succeededSnapshot(req.snapshot, result, completedAt);
  try {
    const applied = await finishSucceededPrediction(db, final, usageOf(final, req.task, result.hardware), writer);
    if (!applied) return result;
    observePrediction(final);
    return { ...result, completedAt };
  } catch (err) {
    log.warn('could not write the final row; the workflow writes it', { error: (err as Error).message });
    return result;
  }
}
