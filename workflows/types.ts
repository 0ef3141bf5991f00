/** Data that crosses the workflow/activity boundary. Plain JSON only. */
import type { PredictionStatus } from '../db/schema';

export interface PredictionArgs {
  id: string;
  accountId: string;
  /** `owner/name`, as shown in the prediction JSON. */
  model: string;
  versionId: string;
  task: string;
  input: Record<string, unknown>;
  createdAt: string;
}

export interface Placement {
  nodeId: string;
  /** The version is already loaded there and its queue is polled. */
  warm: boolean;
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
}

export interface PredictResult {
  output: unknown;
  logs: string[];
  /** Engine-side figures: predict_time, input/output token counts, tokens per second. */
  metrics: Record<string, number>;
  startedAt: string;
  /** The engine stopped early because the prediction was canceled. */
  aborted: boolean;
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
