/**
 * One webhook event for one prediction, delivered until the receiver takes it or the attempts
 * run out. Started by the prediction workflow (or the engine) and then left alone: it outlives
 * its parent, so a slow or dead receiver never holds up inference, and a restart of any process
 * loses no delivery.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { createWebhookActivities } from '../activities/webhooks';
import type { WebhookDelivery } from '../domain/contracts';

type WebhookActivities = ReturnType<typeof createWebhookActivities>;

export async function webhookDeliveryWorkflow(delivery: WebhookDelivery): Promise<void> {
  const { deliverWebhook } = proxyActivities<WebhookActivities>({
    startToCloseTimeout: '45 seconds',
    retry: {
      // The activity picks each delay (its schedule, or the receiver's Retry-After) and gives up
      // after the configured number of attempts with a non-retryable failure.
      initialInterval: '5 seconds',
      backoffCoefficient: 2,
      maximumInterval: '12 hours',
      nonRetryableErrorTypes: ['WebhookGone', 'WebhookRefused', 'WebhookGaveUp'],
    },
  });
  await deliverWebhook(delivery);
}
