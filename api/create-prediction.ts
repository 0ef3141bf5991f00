/**
 * Starting a prediction: resolve the version the caller may use, validate the input against
 * its task's schema, and start workflow `prediction-<id>`. The first row of the projection is
 * written first, in one transaction with the account's admission slot, so the prediction can be
 * read the moment this returns and its workflow need not admit it; a node already serving the
 * version goes along too, so the workflow need not place it (workflows/prediction.ts, the hot path).
 */
import { type Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Account } from '../db/accounts';
import { lockAdmissions, takeSlot } from '../db/admissions';
import type { Db } from '../db/client';
import type { Tx } from '../db/events';
import type { ResolvedVersion } from '../db/models';
import { CREATE_NODES_MAX_AGE_MS, recentLiveNodes } from '../db/nodes';
import { createAdmitted, forgetUnstartedPrediction, getPrediction, type PredictionRow } from '../db/predictions';
import type { RateLimitResult } from '../db/rate-limits';
import { type SessionKey, sessionNode } from '../db/session-affinity';
import { type Placement, PRIORITY_KEYS, type PredictionArgs, predictionWorkflowId } from '../domain/contracts';
import { servingNodes } from '../domain/node-placement';
import { type PredictionSnapshot } from '../domain/prediction-snapshot';
import { estimatePromptTokens, splitCandidate } from '../domain/prefill-split';
import { KilnAccount, KilnModel, KilnStatus } from '../domain/search-attributes';
import { type WebhookEvent, webhookEvents } from '../domain/statuses';
import { taskInputSchema } from '../domain/tasks';
import { idFromKey, newId } from '../lib/ids';
import { workflowExists } from '../lib/temporal-workflows';
import { resolveWebhookTarget, WebhookTargetError } from '../lib/webhook-target';
import type { predictionWorkflow } from '../workflows/prediction';
import { checkLimits } from './admission-limits';
import { ApiError, aboutPrediction, ValidationError } from './errors';
import { withLora } from './lora-adapters';
import { parseIdempotencyKey } from './prediction-request';
import { queuePosition } from './queue-position';
import { parseOr422 } from './validation';

export interface CreateDeps {
  db: Db;
  temporal: Client;
  controlQueue: string;
  allowPrivateWebhooks: boolean;
  /** Sequences a node gives a version whose settings name none (KILN_ENGINE_SEQUENCES): the queue estimate's slots. */
  defaultSequences: number;
  /** KILN_PREFILL_SPLIT_MIN_TOKENS: a prompt this long is prefilled on a `prefill` node, where one is live (absent: never). */
  prefillSplitMinTokens?: number;
}

export interface CreateOptions {
  idempotencyKey?: string;
  priority?: keyof typeof PRIORITY_KEYS;
  webhook?: string;
  webhookEventsFilter?: WebhookEvent[];
  cancelAfterSeconds?: number;
  /** max_queue_seconds / Max-Queue-Time: aborted if it has not started by then. */
  maxQueueSeconds?: number;
  /** x-session-affinity. */
  session?: string;
  /** A Responses chain's first prediction: the session whose node becomes the one that runs it. */
  opensSession?: string;
  /** What the Temporal UI shows for the workflow, instead of `<model> for <account>`. */
  summary?: string;
}

export async function createPrediction(
  deps: CreateDeps,
  account: Account,
  resolved: ResolvedVersion,
  input: Record<string, unknown>,
  opts: CreateOptions = {},
): Promise<{ row: PredictionRow; rateLimit?: RateLimitResult }> {
  // Checked here, so every route that creates (predictions, deployments, OpenAI) checks it alike.
  parseIdempotencyKey(opts.idempotencyKey);
  parseOr422(taskInputSchema(resolved.version.task), input, 'input');
  // A `lora` input runs that adapter of the version: the adapter's own version, queue and usage.
  resolved = await withLora(deps.db, account, resolved, input.lora);
  if (opts.webhook) {
    try {
      await resolveWebhookTarget(opts.webhook, deps.allowPrivateWebhooks);
    } catch (err) {
      if (err instanceof WebhookTargetError) throw new ValidationError([{ field: 'webhook', description: err.message }]);
      throw err;
    }
  }
  const id = opts.idempotencyKey ? idFromKey(account.id, opts.idempotencyKey) : newId();
  // The row is written before the workflow starts: a create that died in between left a row with
  // no workflow, and its retry (same Idempotency-Key) starts that workflow instead of returning it.
  // A row a run has written (it names the run) had its workflow, though Temporal may since have
  // dropped the history (retention): never run it again.
  const existing = opts.idempotencyKey ? await getPrediction(deps.db, account.id, id) : undefined;
  if (existing && (existing.runId !== null || (await workflowExists(deps.temporal, predictionWorkflowId(id))))) return { row: existing };
  const rateLimit = await checkLimits(deps.db, account, resolved.version.task);
  // The request's own limit, else the account's default.
  opts = { ...opts, maxQueueSeconds: opts.maxQueueSeconds ?? account.maxQueueSeconds ?? undefined };
  if (opts.maxQueueSeconds !== undefined) await refuseIfQueueTooLong(deps, account, resolved.version.id, opts.maxQueueSeconds);
  const now = new Date();
  const args = predictionArgs(account, resolved, id, input, opts, now, existing?.createdAt ?? now);
  const first: PredictionSnapshot = {
    ...args,
    output: null,
    logs: '',
    error: null,
    status: 'starting',
    metrics: {},
    startedAt: null,
    completedAt: null,
    // Revision 0: any write from the workflow or the engine takes precedence.
    revision: 0,
  };
  const { row } = await admitAndStart(deps, account, args, {
    // Already there: a create retried with the same Idempotency-Key, whose workflow admits it.
    admit: () => createAdmitted(deps.db, first, account.maxRunning),
    // A retried create with the same Idempotency-Key joins the prediction already running.
    conflictPolicy: opts.idempotencyKey ? 'USE_EXISTING' : 'FAIL',
    reusePolicy: 'REJECT_DUPLICATE',
    // Nothing will ever run it: no row or slot may stay behind.
    undo: () => forgetUnstartedPrediction(deps.db, id),
    summary: opts.summary,
  });
  return { row: row ?? (await getPrediction(deps.db, account.id, id))!, rateLimit };
}

/** The workflow's arguments for a run of prediction `id` (a create's, or a retry's with the first `createdAt`). */
export function predictionArgs(
  account: Account,
  resolved: ResolvedVersion,
  id: string,
  input: Record<string, unknown>,
  opts: Pick<
    CreateOptions,
    'priority' | 'webhook' | 'webhookEventsFilter' | 'cancelAfterSeconds' | 'maxQueueSeconds' | 'session' | 'opensSession'
  >,
  now: Date,
  createdAt = now,
): PredictionArgs {
  return {
    id,
    accountId: account.id,
    model: `${resolved.model.owner}/${resolved.model.name}`,
    versionId: resolved.version.id,
    task: resolved.version.task,
    input,
    createdAt: createdAt.toISOString(),
    webhook: opts.webhook ?? null,
    webhookEventsFilter: opts.webhook ? (opts.webhookEventsFilter ?? [...webhookEvents]) : null,
    deadline: opts.cancelAfterSeconds ? new Date(now.getTime() + opts.cancelAfterSeconds * 1000).toISOString() : null,
    ...(opts.maxQueueSeconds !== undefined ? { queueDeadline: new Date(now.getTime() + opts.maxQueueSeconds * 1000).toISOString() } : {}),
    priority: {
      fairnessKey: account.fairnessGroup ?? account.id,
      fairnessWeight: account.fairnessWeight,
      priorityKey: PRIORITY_KEYS[opts.priority ?? 'default'],
    },
    retry: resolved.version.retry ?? undefined,
    ...(opts.session !== undefined ? { session: opts.session } : {}),
    ...(opts.session === undefined && opts.opensSession !== undefined ? { opensSession: opts.opensSession } : {}),
  };
}

/**
 * A create whose wait is already estimated past its limit is refused before anything is written:
 * 503 with the estimate, and Retry-After for when the queue should have shortened enough.
 */
async function refuseIfQueueTooLong(deps: CreateDeps, account: Account, versionId: string, limitSeconds: number): Promise<void> {
  const queue = await queuePosition(deps, account, versionId);
  if (queue.eta_seconds === null || queue.eta_seconds <= limitSeconds) return;
  throw new ApiError(
    503,
    'Queue too long',
    `The wait to start is estimated at ${queue.eta_seconds} s (position ${queue.position}), past max_queue_seconds ${limitSeconds}`,
    { queue },
    { 'Retry-After': String(Math.max(1, Math.ceil(queue.eta_seconds - limitSeconds))) },
  );
}

export interface StartRun {
  /**
   * Writes the projection's row and takes the account's slot when it has room (`admitted`); no row:
   * it was there already, and the workflow admits it.
   */
  admit: () => Promise<{ row: PredictionRow | undefined; admitted: boolean }>;
  /** USE_EXISTING: a run already open is the one wanted (a create retried with its Idempotency-Key). */
  conflictPolicy: 'USE_EXISTING' | 'FAIL';
  reusePolicy: 'REJECT_DUPLICATE' | 'ALLOW_DUPLICATE';
  /** Undoes `writeRow` and the slot when the workflow did not start. */
  undo: () => Promise<void>;
  /** The Temporal UI's summary of the workflow; `<model> for <account>` if none. */
  summary?: string;
}

/**
 * Writes the row and takes the account's slot in one transaction, then starts a run of
 * `prediction-<id>`. Under the cap the slot is taken here, so the workflow need not admit it;
 * at the cap the workflow waits for a slot there, or refuses.
 */
export async function admitAndStart(
  deps: CreateDeps,
  account: Account,
  args: PredictionArgs,
  run: StartRun,
): Promise<{ row: PredictionRow | undefined; runId?: string }> {
  const [{ row, admitted }, placement, longPrompt] = await Promise.all([
    run.admit(),
    servingNode(
      deps.db,
      args.versionId,
      args.session !== undefined ? { accountId: account.id, session: args.session, versionId: args.versionId } : undefined,
    ),
    longPromptOf(deps, args),
  ]);
  if (admitted) args.admitted = true;
  if (placement) args.placement = placement;
  if (longPrompt) args.longPrompt = longPrompt;
  try {
    const handle = await deps.temporal.workflow.start<typeof predictionWorkflow>('predictionWorkflow', {
      workflowId: predictionWorkflowId(args.id),
      taskQueue: deps.controlQueue,
      args: [args],
      workflowIdConflictPolicy: run.conflictPolicy,
      workflowIdReusePolicy: run.reusePolicy,
      typedSearchAttributes: [
        { key: KilnAccount, value: account.username },
        { key: KilnModel, value: args.model },
        { key: KilnStatus, value: 'starting' },
      ],
      staticSummary: run.summary ?? `${args.model} for ${account.username}`,
      // The whole prediction is fair-queued: its workflow tasks and control activities inherit
      // this, so a flood cannot crowd another account out of the control plane either.
      priority: args.priority,
    });
    return { row, runId: handle.firstExecutionRunId };
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError && run.conflictPolicy === 'USE_EXISTING')) {
      if (row) await run.undo();
      throw aboutPrediction(err, args.id);
    }
    return { row };
  }
}

/**
 * `StartRun.admit` for a row written by the caller's own statement (a retry reopens its row):
 * the row and the account's lock go to the server together, and the slot is taken under the lock.
 */
export function admitWith(
  db: Db,
  account: Account,
  predictionId: string,
  writeRow: (tx: Tx) => Promise<PredictionRow | undefined>,
): StartRun['admit'] {
  return () =>
    db.transaction(async (tx) => {
      const [written] = await Promise.all([writeRow(tx), lockAdmissions(tx, account.id)]);
      if (!written) return { row: undefined, admitted: false };
      return { row: written, admitted: (await takeSlot(tx, predictionId, account.id, account.maxRunning)).admitted };
    });
}

/**
 * The nodes as a create sees them: read at most a second ago. A node that stops serving a
 * version polls its queue a while longer (workers/engine-node.ts), so a prediction sent there
 * on this read is still taken.
 */
const createsLiveNodes = recentLiveNodes(CREATE_NODES_MAX_AGE_MS);

/**
 * A text generation whose prompt is long enough for a prefill/decode split, while `prefill` and
 * `decode` nodes are live (domain/prefill-split.ts). A session keeps its one node instead.
 */
async function longPromptOf(deps: CreateDeps, args: PredictionArgs): Promise<PredictionArgs['longPrompt']> {
  const minTokens = deps.prefillSplitMinTokens;
  if (minTokens === undefined || args.task !== 'text-generation' || args.session !== undefined) return undefined;
  const tokens = estimatePromptTokens(args.input);
  if (tokens < minTokens) return undefined;
  return splitCandidate(await createsLiveNodes(deps.db), tokens, minTokens) ? { tokens } : undefined;
}

/** A live node that has the version loaded (its queue is polled), if any: the prediction is warm. A session keeps its node. */
async function servingNode(db: Db, versionId: string, session?: SessionKey): Promise<Placement | undefined> {
  const serving = servingNodes(await createsLiveNodes(db), versionId);
  if (serving.length === 0) return undefined;
  const any = serving[Math.floor(Math.random() * serving.length)].id;
  if (!session) return { nodeId: any, warm: true };
  return {
    nodeId: await sessionNode(
      db,
      session,
      serving.map((n) => n.id),
      any,
    ),
    warm: true,
  };
}
