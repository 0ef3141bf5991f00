import { type Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { Router } from 'express';
import type { Account } from '../../db/accounts';
import type { Db } from '../../db/client';
import { getPrediction, type PredictionRow, rowToSnapshot } from '../../db/predictions';
import { currentWebhookSecret, deliveriesFor, rotateWebhookSecret } from '../../db/webhooks';
import { redeliveryWorkflowId, type WebhookDelivery, webhookWorkflowId } from '../../domain/contracts';
import { KilnAccount } from '../../domain/search-attributes';
import { isTerminalStatus } from '../../domain/statuses';
import type { SecretBox } from '../../lib/secret-box';
import { checkRequestRate, setRateLimitHeaders } from '../admission-limits';
import { currentAccount } from '../auth';
import { ApiError, NotFoundError, TooManyRequestsError } from '../errors';
import { errorBody, redeliveryBody, rotatedSecretBody, webhookDeliveriesBody, webhookSecretBody } from '../response-schemas';
import { errorResponses, jsonResponse, pathParams, type RouteContract } from '../route-contract';

export interface WebhookRoutesDeps {
  db: Db;
  secrets: SecretBox;
  temporal: Client;
  controlQueue: string;
  /** Per account and minute (KILN_WEBHOOK_ROTATIONS_PER_MINUTE, KILN_WEBHOOK_REDELIVERIES_PER_MINUTE). */
  limits: { rotationsPerMinute: number; redeliveriesPerMinute: number };
}

export function webhookRoutes(deps: WebhookRoutesDeps): Router {
  const router = Router();

  /** Replicate's: the key receivers verify signatures with. */
  router.get('/webhooks/default/secret', async (_req, res) => {
    res.json({ key: await currentWebhookSecret(deps.db, deps.secrets, currentAccount(res).id) });
  });

  /** A new key; the one it replaces keeps signing (both signatures are sent) until it expires. */
  router.post('/webhooks/default/secret/rotate', async (_req, res) => {
    const account = currentAccount(res);
    const rate = await checkRequestRate(deps.db, account.id, 'webhooks:rotate', deps.limits.rotationsPerMinute, 'webhook secret rotations');
    setRateLimitHeaders(res, rate);
    const { key, previousExpiresAt } = await rotateWebhookSecret(deps.db, deps.secrets, account.id);
    res.json({ key, previous_key_expires_at: previousExpiresAt.toISOString() });
  });

  /** Every delivery attempt of the prediction's webhooks. */
  router.get('/predictions/:id/webhooks', async (req, res) => {
    const row = await getPrediction(deps.db, currentAccount(res).id, req.params.id);
    if (!row) throw new NotFoundError(`Prediction ${req.params.id} not found`);
    const attempts = await deliveriesFor(deps.db, row.id);
    res.json({
      webhook: row.webhook,
      results: attempts.map((a) => ({
        webhook_id: a.webhookId,
        event: a.event,
        url: a.url,
        attempt: a.attempt,
        status_code: a.statusCode,
        latency_ms: a.latencyMs,
        error: a.error,
        created_at: a.createdAt.toISOString(),
      })),
    });
  });

  /**
   * Sends the `completed` event again, with its original webhook-id so receivers can dedupe. One
   * redelivery per prediction is in flight at a time (its workflow id is fixed): asked again while
   * it runs, the answer names that one (`started: false`) and nothing more is sent. Redeliveries
   * in flight count against the account's max_running, apart from its predictions, so that a
   * receiver that never answers cannot hold more of the control worker than the account's work.
   */
  router.post('/predictions/:id/webhooks/redeliver', async (req, res) => {
    const account = currentAccount(res);
    const row = await getPrediction(deps.db, account.id, req.params.id);
    if (!row) throw new NotFoundError(`Prediction ${req.params.id} not found`);
    if (!row.webhook) throw new ApiError(409, 'Conflict', 'This prediction has no webhook');
    if (!isTerminalStatus(row.status)) throw new ApiError(409, 'Conflict', 'The prediction has not finished yet');
    const rate = await checkRequestRate(
      deps.db,
      account.id,
      'webhooks:redeliver',
      deps.limits.redeliveriesPerMinute,
      'webhook redeliveries',
    );
    setRateLimitHeaders(res, rate);
    const { webhookId, workflowId, started } = await startRedelivery(deps, account, { ...row, webhook: row.webhook });
    res.status(202).json({ webhook_id: webhookId, delivery: workflowId, started });
  });

  return router;
}

/** Query for the account's redeliveries still running (only redeliveries carry KilnAccount). */
const runningRedeliveries = (account: Account) =>
  `WorkflowType = 'webhookDeliveryWorkflow' AND KilnAccount = '${account.username}' AND ExecutionStatus = 'Running'`;

/**
 * Refuses a new redelivery while the account has max_running of them in flight. The count comes
 * from Temporal's visibility, so redeliveries started in the same instant may pass it together:
 * the per-minute rate limit bounds that overshoot.
 */
async function checkRedeliveriesInFlight(
  deps: Pick<WebhookRoutesDeps, 'temporal'>,
  account: Account,
  workflowId: string,
): Promise<'room' | 'running'> {
  const { count } = await deps.temporal.workflow.count(runningRedeliveries(account));
  if (count < account.maxRunning) return 'room';
  const ours = await deps.temporal.workflow
    .getHandle(workflowId)
    .describe()
    .catch(() => undefined);
  if (ours?.status.name === 'RUNNING') return 'running';
  throw new TooManyRequestsError(
    `${count} webhook redeliveries are in flight for this account (max_running ${account.maxRunning}); wait for one to finish`,
    60,
  );
}

/**
 * Starts the prediction's redelivery of its `completed` event, unless one is running: then that
 * one is the answer (`started: false`). A closed one may run again.
 */
async function startRedelivery(
  deps: Pick<WebhookRoutesDeps, 'temporal' | 'controlQueue'>,
  account: Account,
  row: PredictionRow & { webhook: string },
): Promise<{ webhookId: string; workflowId: string; started: boolean }> {
  const webhookId = webhookWorkflowId(row.id, 'completed', 1);
  const delivery: WebhookDelivery = {
    webhookId,
    event: 'completed',
    url: row.webhook,
    accountId: row.accountId,
    snapshot: rowToSnapshot(row),
  };
  const workflowId = redeliveryWorkflowId(row.id);
  if ((await checkRedeliveriesInFlight(deps, account, workflowId)) === 'running') return { webhookId, workflowId, started: false };
  try {
    await deps.temporal.workflow.start('webhookDeliveryWorkflow', {
      workflowId,
      taskQueue: deps.controlQueue,
      args: [delivery],
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      workflowIdConflictPolicy: 'FAIL',
      typedSearchAttributes: [{ key: KilnAccount, value: account.username }],
    });
    return { webhookId, workflowId, started: true };
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return { webhookId, workflowId, started: false };
    throw err;
  }
}

export const webhookContracts: RouteContract[] = [
  {
    method: 'get',
    path: '/v1/webhooks/default/secret',
    summary: 'The webhook signing secret',
    responses: { '200': jsonResponse('The key', webhookSecretBody), ...errorResponses },
  },
  {
    method: 'post',
    path: '/v1/webhooks/default/secret/rotate',
    summary: 'A new signing secret; the one it replaces signs too for a while (never more than these two)',
    responses: {
      '200': jsonResponse('The new key', rotatedSecretBody),
      ...errorResponses,
      '429': jsonResponse('Over the rotations allowed per minute (Retry-After)', errorBody),
    },
  },
  {
    method: 'get',
    path: '/v1/predictions/{id}/webhooks',
    summary: 'Webhook delivery log',
    request: { params: pathParams('id') },
    responses: { '200': jsonResponse('Every delivery attempt', webhookDeliveriesBody), ...errorResponses },
  },
  {
    method: 'post',
    path: '/v1/predictions/{id}/webhooks/redeliver',
    summary: 'Send the completed event again, with its original webhook-id; one redelivery per prediction at a time',
    request: { params: pathParams('id') },
    responses: {
      '202': jsonResponse('Started, or already in flight (started: false)', redeliveryBody),
      '409': jsonResponse('No webhook, or not finished', errorBody),
      ...errorResponses,
      '429': jsonResponse('Over the redeliveries allowed per minute, or max_running redeliveries in flight (Retry-After)', errorBody),
    },
  },
];
