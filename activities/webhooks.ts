/**
 * Webhook delivery: one attempt per activity execution, signed per Standard Webhooks with every
 * secret the account has in force, and logged. The retry schedule is Temporal's, with each delay
 * chosen here: the configured schedule, or the receiver's Retry-After.
 */
import { ApplicationFailure, Context, log } from '@temporalio/activity';
import { Webhook } from 'standardwebhooks';
import type { Db } from '../db/client';
import { recordDelivery, signingSecrets } from '../db/webhooks';
import type { WebhookDelivery } from '../domain/contracts';
import { webhookAttempts } from '../lib/metrics';
import { pinnedRequest } from '../lib/pinned-request';
import type { SecretBox } from '../lib/secret-box';
import { resolveWebhookTarget, type WebhookTarget, WebhookTargetError } from '../lib/webhook-target';

export interface WebhookDeps {
  db: Db;
  /** Opens the account's stored (sealed) signing secrets. */
  secrets: SecretBox;
  allowPrivate: boolean;
  /** Delays in ms before attempt 2, 3, …; the last repeats. */
  scheduleMs: number[];
  maxAttempts: number;
  /** Turns the workflow's snapshot into the prediction JSON the API serves. */
  render: (delivery: WebhookDelivery) => unknown;
  timeoutMs?: number;
}

/** Seconds or an HTTP date, as RFC 9110 allows; capped at a day. */
export function retryAfterMs(header: string | undefined, now = Date.now()): number | undefined {
  if (!header) return undefined;
  const ms = /^\d+$/.test(header.trim()) ? Number(header) * 1000 : Date.parse(header) - now;
  return Number.isFinite(ms) && ms >= 0 ? Math.min(ms, 24 * 3600 * 1000) : undefined;
}

interface PostResult {
  status: number;
  retryAfter?: string;
}

async function post(
  target: WebhookTarget,
  body: string,
  headers: Record<string, string>,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<PostResult> {
  const res = await pinnedRequest(target, { method: 'POST', headers, body, timeoutMs, signal });
  return new Promise((resolve, reject) => {
    res.resume();
    res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] }));
    res.on('error', reject);
  });
}

export function createWebhookActivities(deps: WebhookDeps) {
  const timeoutMs = deps.timeoutMs ?? 30_000;
  return {
    async deliverWebhook(delivery: WebhookDelivery): Promise<{ status: number; attempt: number }> {
      const ctx = Context.current();
      const attempt = ctx.info.attempt;
      const predictionId = delivery.snapshot.id;
      const body = JSON.stringify(deps.render(delivery));
      const started = performance.now();
      const logAttempt = (statusCode: number | null, error: string | null) =>
        recordDelivery(deps.db, {
          predictionId,
          accountId: delivery.accountId,
          webhookId: delivery.webhookId,
          event: delivery.event,
          url: delivery.url,
          attempt,
          statusCode,
          latencyMs: Math.round(performance.now() - started),
          error,
        });

      let target;
      try {
        target = await resolveWebhookTarget(delivery.url, deps.allowPrivate);
      } catch (err) {
        if (!(err instanceof WebhookTargetError)) throw err;
        await logAttempt(null, `refused: ${err.message}`);
        throw ApplicationFailure.create({ type: 'WebhookRefused', message: `webhook URL ${err.message}`, nonRetryable: true });
      }

      const timestamp = new Date();
      const secrets = await signingSecrets(deps.db, deps.secrets, delivery.accountId);
      const signature = secrets.map((s) => new Webhook(s).sign(delivery.webhookId, timestamp, body)).join(' ');
      const headers = {
        'content-type': 'application/json',
        'user-agent': 'Kiln-Webhooks/1.0',
        'webhook-id': delivery.webhookId,
        'webhook-timestamp': Math.floor(timestamp.getTime() / 1000).toString(),
        'webhook-signature': signature,
      };

      let result: PostResult | undefined;
      let failure: string;
      try {
        result = await post(target, body, headers, timeoutMs, ctx.cancellationSignal);
        failure = result.status >= 200 && result.status < 300 ? '' : `receiver answered ${result.status}`;
      } catch (err) {
        failure = (err as Error).message;
      }
      await logAttempt(result?.status ?? null, failure || null);
      webhookAttempts.inc({ event: delivery.event, outcome: failure ? (result ? `http_${result.status}` : 'network') : 'delivered' });
      if (!failure) return { status: result!.status, attempt };

      if (result?.status === 410) {
        throw ApplicationFailure.create({ type: 'WebhookGone', message: 'receiver answered 410 Gone: not retrying', nonRetryable: true });
      }
      if (attempt >= deps.maxAttempts) {
        throw ApplicationFailure.create({
          type: 'WebhookGaveUp',
          message: `${failure}; gave up after ${attempt} attempts`,
          nonRetryable: true,
        });
      }
      const delay = retryAfterMs(result?.retryAfter) ?? deps.scheduleMs[Math.min(attempt - 1, deps.scheduleMs.length - 1)];
      log.info('webhook delivery failed, will retry', { webhookId: delivery.webhookId, attempt, delayMs: delay, failure });
      throw ApplicationFailure.create({ type: 'WebhookDeliveryFailed', message: failure, nextRetryDelay: delay });
    },
  };
}
