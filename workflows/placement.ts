/**
 * Placement and warm-up, and the attempt rules around them, shared by every workflow that runs
 * work on a model's queue (predictions, batches): pick a node, load the version there if it is
 * cold, and decide after a failed attempt whether another one may help and when.
 */
import { TimeoutType } from '@temporalio/common';
import { ActivityFailure, ApplicationFailure, proxyActivities, proxyLocalActivities, TimeoutFailure } from '@temporalio/workflow';
import type { createControlActivities } from '../activities/control';
import type { createEngineActivities } from '../activities/engine';
import { DEFAULT_RETRY_POLICY, type LoadResult, nodeQueue, type Placement, type RetryPolicy } from '../domain/contracts';
import { isNonRetryableType, NON_RETRYABLE_TYPES, RETRYABLE_TYPES } from '../domain/failures';

type ControlActivities = ReturnType<typeof createControlActivities>;
type EngineActivities = ReturnType<typeof createEngineActivities>;

const placement = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '10 seconds',
  scheduleToCloseTimeout: '5 minutes',
  retry: { initialInterval: '500 ms', backoffCoefficient: 1.5, maximumInterval: '5 seconds', nonRetryableErrorTypes: NON_RETRYABLE_TYPES },
});

/** The engine activities of one node, on its queue `node:<id>` (loading models there). */
export function engineOnNode(nodeId: string, { maximumAttempts = 2 } = {}) {
  return proxyActivities<EngineActivities>({
    taskQueue: nodeQueue(nodeId),
    // A node that has died never starts the task: go back to placement instead of waiting.
    scheduleToStartTimeout: '30 seconds',
    startToCloseTimeout: '30 minutes',
    heartbeatTimeout: '30 seconds',
    retry: { maximumAttempts, nonRetryableErrorTypes: NON_RETRYABLE_TYPES },
  });
}

/**
 * A node for the version: one that serves it already, or the best fit, avoiding `excludeNodes`;
 * for a session (x-session-affinity), the node it had while that one still serves the version.
 */
export function placeModel(
  versionId: string,
  excludeNodes: string[],
  session?: { accountId: string; session: string },
): Promise<Placement> {
  return placement.placeModel({ versionId, excludeNodes, ...(session ? { session } : {}) });
}

/**
 * Loads the version on the placed node when it is cold, logging what the cold start cost.
 * Returns the seconds it spent (zero when warm, or when another workflow had just loaded it).
 */
export async function warmUp(place: Placement, model: string, versionId: string, logLine: (line: string) => void): Promise<number> {
  if (place.warm) return 0;
  logLine(`Warming up ${model} on node ${place.nodeId}`);
  const load: LoadResult = await engineOnNode(place.nodeId).loadModel({ versionId });
  if (load.alreadyLoaded) return 0;
  if (load.downloadedBytes > 0) {
    logLine(`Downloaded ${(load.downloadedBytes / 2 ** 20).toFixed(1)} MiB in ${load.downloadSeconds.toFixed(2)} s`);
  }
  logLine(`Loaded in ${load.loadSeconds.toFixed(2)} s`);
  return load.downloadSeconds + load.loadSeconds;
}

/**
 * A failure worth another attempt: a timeout (the node died, or never took the work) or any
 * fault that is not one of Kiln's non-retryable types.
 */
export function isRetryableFault(err: unknown): boolean {
  if (!(err instanceof ActivityFailure)) return false;
  if (err.cause instanceof TimeoutFailure) return true;
  if (err.cause instanceof ApplicationFailure) return !err.cause.nonRetryable && !isNonRetryableType(err.cause.type);
  return true;
}

/**
 * The engine that ran the attempt is gone (its process killed, its node lost): the restart's
 * report (`EngineInterrupted`) or the heartbeat timeout says so. Nothing about the work is wrong,
 * so the next attempt need not wait: it goes where a live engine can continue the output.
 */
export function isEngineLoss(err: unknown): boolean {
  if (!(err instanceof ActivityFailure)) return false;
  if (err.cause instanceof TimeoutFailure) return err.cause.timeoutType === TimeoutType.HEARTBEAT;
  return err.cause instanceof ApplicationFailure && err.cause.type === 'EngineInterrupted';
}

/** The node an attempt ran on, when its heartbeats said (the engine's heartbeat details carry `nodeId`). */
export function nodeOfFailure(err: unknown): string | undefined {
  if (!(err instanceof ActivityFailure) || !(err.cause instanceof TimeoutFailure)) return undefined;
  const details = err.cause.lastHeartbeatDetails as { nodeId?: unknown } | undefined;
  return typeof details?.nodeId === 'string' ? details.nodeId : undefined;
}

const isKilnFailure = (e: Error) =>
  e instanceof ApplicationFailure && (NON_RETRYABLE_TYPES.includes(e.type as never) || RETRYABLE_TYPES.includes(e.type as never));

/** The innermost message, with its Kiln failure type when it has one: an activity failure wraps the error that caused it. */
export function describeFailure(err: unknown): string {
  let e: unknown = err;
  // Kiln's own failure is the description; what it wraps (an engine's error, a native one) is its cause.
  while (e instanceof Error && e.cause instanceof Error && !isKilnFailure(e)) e = e.cause;
  if (e instanceof TimeoutFailure) return e.message || `${e.timeoutType?.toLowerCase() ?? 'activity'} timeout`;
  if (e instanceof ApplicationFailure && e.type && e.type !== 'Error') return `${e.type}: ${e.message}`;
  return e instanceof Error ? e.message : String(e);
}

export function retryPolicyOf(policy: RetryPolicy | undefined): RetryPolicy {
  return { ...DEFAULT_RETRY_POLICY, ...policy };
}

/** The wait before attempt `attempt + 1`, after `attempt` attempts failed. */
export function retryDelayMs(policy: RetryPolicy, attempt: number): number {
  return Math.round(policy.initial_interval_s * policy.backoff ** (attempt - 1) * 1000);
}
