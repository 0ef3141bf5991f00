import type { PredictionStatus, WebhookEvent } from './statuses';

/** What the prediction workflow knows at one transition; written whole, so a replay rewrites the same row. */
export interface PredictionSnapshot {
  id: string;
  accountId: string;
  model: string;
  versionId: string;
  input: Record<string, unknown>;
  output: unknown;
  logs: string;
  error: string | null;
  status: PredictionStatus;
  /** Figures, and words where a figure would not say it (`cache_tier`). */
  metrics: Record<string, number | string>;
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
  webhook?: string | null;
  webhookEventsFilter?: WebhookEvent[] | null;
  deadline?: string | null;
  revision: number;
}
