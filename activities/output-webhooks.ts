/**
 * `output` webhooks while the engine generates: at most one per 500 ms (Replicate's rule), each
 * a delivery workflow of its own, so a slow receiver never slows generation down. The last
 * state always arrives with the `completed` webhook that the prediction workflow sends.
 */
import type { Client } from '@temporalio/client';
import { outputWebhookId, WEBHOOK_THROTTLE_MS, type WebhookDelivery } from '../domain/contracts';
import type { PredictionSnapshot } from '../domain/prediction-snapshot';

export class OutputWebhooks {
  private n = 0;
  private lastAt = 0;
  private timer?: NodeJS.Timeout;
  private latest?: unknown[];
  private stopped = false;
  private readonly enabled: boolean;

  constructor(
    private client: Client,
    private taskQueue: string,
    private snapshot: PredictionSnapshot,
    private onError: (err: Error) => void,
    /** The engine attempt sending them: ids are unique across attempts. */
    private attempt?: number,
  ) {
    this.enabled = Boolean(snapshot.webhook && snapshot.webhookEventsFilter?.includes('output'));
  }

  outputChanged(output: unknown[]): void {
    if (!this.enabled || this.stopped) return;
    this.latest = output;
    if (this.timer) return;
    const wait = Math.max(0, this.lastAt + WEBHOOK_THROTTLE_MS - Date.now());
    this.timer = setTimeout(() => this.send(), wait);
  }

  private send(): void {
    this.timer = undefined;
    if (this.stopped || !this.latest) return;
    this.lastAt = Date.now();
    this.n += 1;
    const webhookId = outputWebhookId(this.snapshot.id, this.attempt, this.n);
    const delivery: WebhookDelivery = {
      webhookId,
      event: 'output',
      url: this.snapshot.webhook!,
      accountId: this.snapshot.accountId,
      snapshot: { ...this.snapshot, output: [...this.latest] },
    };
    this.client.workflow
      .start('webhookDeliveryWorkflow', { workflowId: webhookId, taskQueue: this.taskQueue, args: [delivery] })
      .catch(this.onError);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }
}
