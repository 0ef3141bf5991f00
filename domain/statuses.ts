/** The domain's vocabularies: engines, statuses and events, stored as text columns by db/schema.ts. */

/** `echo-fixture` is a test fixture (no inference): it serves benchmarks of the orchestration. */
export const engines = ['llama.cpp', 'onnxruntime', 'echo-fixture'] as const;
export type EngineName = (typeof engines)[number];

export interface VersionFile {
  path: string;
  sha256: string;
  size: number;
}

export interface VersionRetryPolicy {
  max_attempts: number;
  initial_interval_s: number;
  backoff: number;
}

export const predictionStatuses = ['starting', 'processing', 'succeeded', 'failed', 'canceled', 'aborted'] as const;
export type PredictionStatus = (typeof predictionStatuses)[number];

/** The statuses a prediction never leaves. */
export const terminalStatuses: readonly PredictionStatus[] = ['succeeded', 'failed', 'canceled', 'aborted'];
export const isTerminalStatus = (status: string): boolean => (terminalStatuses as readonly string[]).includes(status);

export const webhookEvents = ['start', 'output', 'logs', 'completed'] as const;
export type WebhookEvent = (typeof webhookEvents)[number];

/**
 * `reset`: the engine attempt that wrote the output before it failed, and a new attempt starts
 * the output again; a client drops the text it has (Kiln's extension of Replicate's events).
 * `attempt`: a new attempt begins after a failed one and continues the output already in the
 * stream; it fences the failed attempt's late writes out and is never sent to clients.
 */
export const streamEvents = ['output', 'logs', 'error', 'done', 'reset', 'attempt'] as const;
export type StreamEvent = (typeof streamEvents)[number];

export interface LoadedVersion {
  versionId: string;
  memoryBytes: number;
  lastUsedAt: string;
  /** A LoRA adapter: the base version it runs on, loaded on the same node (its memory counted there). */
  loraFor?: string;
}

export const batchStatuses = ['starting', 'processing', 'succeeded', 'failed', 'canceled'] as const;
export type BatchStatus = (typeof batchStatuses)[number];
