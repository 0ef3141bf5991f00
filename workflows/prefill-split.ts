/**
 * Prefill/decode split, workflow side (domain/prefill-split.ts): a long prompt is prefilled on a
 * `prefill` node, which puts its KV snapshot in the object tier, and then decoded on a `decode`
 * node, whose predict restores that snapshot. Both are activities of the prediction's history: the
 * prefill's result names its node, the snapshot's bytes and the time each part took, and the
 * predict's metrics name both nodes. A prefill that fails (its node lost, its load refused) costs
 * only itself: the decode node prefills the prompt as it would without a split, and a snapshot
 * that went missing is found missing there, with the same outcome.
 */
import { isCancellation, proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { createControlActivities } from '../activities/control';
import type { createEngineActivities } from '../activities/engine';
import { type Placement, type PredictionArgs, type PrefillResult, prefillQueue } from '../domain/contracts';
import { NON_RETRYABLE_TYPES } from '../domain/failures';
import { describeFailure, warmUp } from './placement';

type ControlActivities = ReturnType<typeof createControlActivities>;
type EngineActivities = ReturnType<typeof createEngineActivities>;

/** The split's commands (placeSplit, the prefill node's warm-up and prefill), which histories from before it lack. */
export const PREFILL_SPLIT_PATCH = 'prefill-split';

const placement = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '200 ms', maximumAttempts: 3, nonRetryableErrorTypes: NON_RETRYABLE_TYPES },
});

/** The prefill node's own queue: a node that is gone never starts it, and the decode node prefills instead. */
function prefillOn(nodeId: string) {
  return proxyActivities<EngineActivities>({
    taskQueue: prefillQueue(nodeId),
    scheduleToStartTimeout: '10 seconds',
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: '5 seconds',
    // One try: the fallback (prefill on the decode node) is cheaper than a second wait.
    retry: { maximumAttempts: 1 },
  });
}

/** What a split gives the attempt: the decode node, what the prefill left there for it, and the warm-up time spent. */
export interface SplitAttempt {
  decode: Placement;
  prefilled: PrefillResult;
  setupSeconds: number;
}

/** No snapshot from the prefill node: the decode node prefills the prompt itself. */
const nothingPrefilled = (nodeId: string): PrefillResult => ({
  nodeId,
  snapshot: null,
  tokens: 0,
  bytes: 0,
  prefillSeconds: 0,
  uploadSeconds: 0,
});

/**
 * Places the split and runs its prefill step; undefined where placement finds no `prefill` and
 * `decode` node pair for the version (the prediction then goes the usual way).
 */
export async function prefillSplit(args: PredictionArgs, logLine: (line: string) => void): Promise<SplitAttempt | undefined> {
  const split = await placement.placeSplit({ versionId: args.versionId });
  if (!split) return undefined;
  const { prefill, decode } = split;
  try {
    const setupSeconds = await warmUp(prefill, args.model, args.versionId, logLine);
    const prefilled = await prefillOn(prefill.nodeId).prefill({
      predictionId: args.id,
      versionId: args.versionId,
      input: args.input,
      owner: args.accountId,
    });
    logLine(
      `Prefilled ${prefilled.tokens} prompt tokens on node ${prefilled.nodeId} in ${prefilled.prefillSeconds.toFixed(3)} s` +
        (prefilled.snapshot
          ? `; KV snapshot of ${prefilled.bytes} bytes in object storage in ${prefilled.uploadSeconds.toFixed(3)} s`
          : '; no KV snapshot kept'),
    );
    return { decode, prefilled, setupSeconds };
  } catch (err) {
    if (isCancellation(err)) throw err;
    logLine(`Prefill on node ${prefill.nodeId} failed (${describeFailure(err)}): node ${decode.nodeId} prefills the prompt itself`);
    return { decode, prefilled: nothingPrefilled(prefill.nodeId), setupSeconds: 0 };
  }
}
