/** Data that crosses the workflow/activity boundary. Plain JSON only. */
import type { PredictionMetrics } from './prediction-metrics';
import type { PredictionStatus, WebhookEvent } from './statuses';

export interface PredictionArgs {
  id: string;
  accountId: string;
  /** `owner/name`, as shown in the prediction JSON. */
  model: string;
  versionId: string;
  task: string;
  input: Record<string, unknown>;
  createdAt: string;
  webhook: string | null;
  /** Which webhook events to send; null when there is no webhook. */
  webhookEventsFilter: WebhookEvent[] | null;
  /** Cancel-After, as an instant. */
  deadline: string | null;
  /** max_queue_seconds, as an instant: not started by then, the prediction is aborted. */
  queueDeadline?: string;
  /** Temporal task priority of the predict activity: the fair queue's key, weight and level. */
  priority: PredictionPriority;
  /** The version's retry policy; absent in workflows started before versions had one. */
  retry?: RetryPolicy;
  /**
   * The API took the admission slot and wrote the first row in its create transaction (absent in
   * workflows started before it did, and when the account was at its cap: the workflow admits).
   */
  admitted?: boolean;
  /** A node that served the version when the API created the prediction: no placement step. */
  placement?: Placement;
  /**
   * x-session-affinity: the session's predictions run on the node it was placed on (its queue
   * `sessions:<node>`), where the engine keeps the session's evaluated tokens.
   */
  session?: string;
  /**
   * A chain's first prediction (the Responses API): it runs as any other, from the model's fair
   * queue on whichever node takes it, and that node becomes this session's node, so the chain's
   * next predictions (`session`) go where its prefix is cached.
   */
  opensSession?: string;
  /**
   * A prompt long enough for a prefill/decode split (its estimated tokens), set by the API when a
   * prefill node was live: the workflow then asks placement for a split (domain/prefill-split.ts).
   */
  longPrompt?: { tokens: number };
}

/** How often and how soon a failed attempt is tried again (set per model version). */
export interface RetryPolicy {
  /** Attempts in all, the first included: 1 means no retry. */
  max_attempts: number;
  /** Wait before the second attempt, in seconds. */
  initial_interval_s: number;
  /** Each later wait is the previous one times this. */
  backoff: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { max_attempts: 3, initial_interval_s: 1, backoff: 2 };

export interface PredictionPriority {
  fairnessKey: string;
  fairnessWeight: number;
  /** 1 (first) to 5; interactive calls 2, the default 3, batch work 4. */
  priorityKey: number;
}

export const PRIORITY_KEYS = { interactive: 2, default: 3, batch: 4 } as const;

export interface Placement {
  nodeId: string;
  /** The version is already loaded there and its queue is polled. */
  warm: boolean;
}

/** A long prompt's prefill node and decode node (domain/prefill-split.ts). */
export interface SplitPlacement {
  prefill: Placement;
  decode: Placement;
}

/** The one replica scaler of a namespace (workflows/replica-scaler.ts). */
export const REPLICA_SCALER_ID = 'kiln-replica-scaler';

/** The one reconciler of a namespace (workflows/reconciler.ts). */
export const RECONCILER_ID = 'kiln-reconciler';

/** A replica the scaler loads: the version on that node. */
export interface ReplicaLoad {
  versionId: string;
  nodeId: string;
}

export interface LoadResult {
  nodeId: string;
  /** Seconds spent on this load; zero when another prediction had already loaded it. */
  downloadSeconds: number;
  loadSeconds: number;
  downloadedBytes: number;
  alreadyLoaded: boolean;
}

export interface PredictRequest {
  predictionId: string;
  versionId: string;
  task: string;
  input: Record<string, unknown>;
  /** The prediction as the engine starts it: what its output webhooks carry, output aside. */
  snapshot: PredictionSnapshotLike;
  /** Which attempt this is (1 for the first); absent from workflows that did not number them. */
  attempt?: number;
  /**
   * The output that earlier, failed attempts left in the stream: a streaming task continues it
   * (it is the start of the model's response), so clients see one generation.
   */
  continues?: string;
  /** The length of `continues` in tokens, as the failed attempts counted them. */
  continuedTokens?: number;
  /**
   * The engine writes the `processing` and final `succeeded` rows itself (domain/engine-projection.ts),
   * releases the admission slot and records usage, instead of signalling the workflow.
   */
  project?: boolean;
  /** x-session-affinity: the engine keeps this session's sequence state for its next request. */
  session?: string;
  /** PredictionArgs.opensSession: the engine that runs it records its node as this session's. */
  opensSession?: string;
  /** The prompt was prefilled on another node, whose KV snapshot this engine restores (or prefills again where it cannot). */
  prefilled?: PrefillResult;
}

/** Prefill on a prefill node: evaluate the prompt and put its KV snapshot in the object tier. */
export interface PrefillRequest {
  predictionId: string;
  versionId: string;
  input: Record<string, unknown>;
  /** Whose prompt it is: snapshots are kept per owner. */
  owner: string;
}

/** What a prefill left for the decode node: the snapshot, where it was made, and what each part cost. */
export interface PrefillResult {
  nodeId: string;
  /** The snapshot's name (sha256 of version, owner, tokens), or null when the prompt was too short to keep one. */
  snapshot: string | null;
  tokens: number;
  /** The snapshot's state file, in bytes: what the decode node downloads. */
  bytes: number;
  /** Seconds waiting on the node for the prefills before it (one runs at a time); absent in results from before. */
  waitSeconds?: number;
  /** Seconds evaluating the prompt (tokens a snapshot on the node already held are not evaluated again). */
  prefillSeconds: number;
  /** Seconds saving the state file and putting it in the object tier. */
  uploadSeconds: number;
}

export interface PredictResult {
  output: unknown;
  logs: string[];
  /** Engine-side figures: predict_time, input/output token counts, tokens per second, cache tier. */
  metrics: PredictionMetrics;
  startedAt: string;
  /** The engine stopped early because the prediction was canceled. */
  aborted: boolean;
  /** What ran it, for usage: `cpu` or the GPU backend. */
  hardware: string;
  /** When the engine wrote the final row itself (`PredictRequest.project`): the prediction's completed_at. */
  completedAt?: string;
}

export interface PredictionStartedSignal {
  startedAt: string;
  nodeId: string;
}

export type { PredictionStatus };

/** Sent by the engine when a prediction leaves the fair queue and starts running. */
export const PREDICTION_STARTED_SIGNAL = 'predictionStarted';

export const predictionWorkflowId = (id: string): string => `prediction-${id}`;

export const modelQueue = (versionId: string): string => `model:${versionId}`;
export const nodeQueue = (nodeId: string): string => `node:${nodeId}`;
/** Predictions of sessions (x-session-affinity) placed on the node, whatever their version. */
export const sessionQueue = (nodeId: string): string => `sessions:${nodeId}`;
/** Prefills placed on the node (role `prefill`), whatever their version. */
export const prefillQueue = (nodeId: string): string => `prefill:${nodeId}`;

/** One webhook event: the prediction as it was at that moment, and where to send it. */
export interface WebhookDelivery {
  /** The `webhook-id` header: the same on every attempt, so receivers can drop duplicates. */
  webhookId: string;
  event: WebhookEvent;
  url: string;
  accountId: string;
  snapshot: PredictionSnapshotLike;
}

/** The prediction state a webhook carries (db/predictions.ts PredictionSnapshot). */
export type PredictionSnapshotLike = import('./prediction-snapshot').PredictionSnapshot;

export const webhookWorkflowId = (predictionId: string, event: WebhookEvent, n: number): string => `webhook-${predictionId}-${event}-${n}`;

/** The one redelivery of a prediction's `completed` event that may be in flight (POST …/webhooks/redeliver). */
export const redeliveryWorkflowId = (predictionId: string): string => `${webhookWorkflowId(predictionId, 'completed', 1)}-redelivery`;

/**
 * An `output` webhook the engine sends: numbered within its attempt, so a later attempt's never
 * takes the id of an earlier one's (receivers would drop it as a duplicate). The first attempt
 * keeps the plain numbering.
 */
export const outputWebhookId = (predictionId: string, attempt: number | undefined, n: number): string =>
  attempt === undefined || attempt <= 1 ? webhookWorkflowId(predictionId, 'output', n) : `webhook-${predictionId}-output-a${attempt}-${n}`;

/** Replicate's rule: output and logs webhooks at most this often; completed is never held back. */
export const WEBHOOK_THROTTLE_MS = 500;
