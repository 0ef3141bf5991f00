/**
 * The projection rows an engine writes itself on the hot path (a prediction whose workflow asks
 * for it with `PredictRequest.project`): `processing` when it has run a moment, and the final
 * `succeeded` row. Pure functions of what the workflow sent and what the engine returned, so the
 * workflow computes the very same final state from its history (rebuild-projections reads it)
 * without a write of its own.
 *
 * Revisions: the workflow sends its state at revision r; the engine writes r + 1 and r + 2, and
 * the workflow counts r + 2 after every such attempt, so its own later writes always win.
 */
import type { PredictResult } from './contracts';
import type { PredictionSnapshot } from './prediction-snapshot';

/** Revisions an engine attempt may write beyond the snapshot it was sent. */
export const ENGINE_REVISIONS = 2;

const seconds = (from: string, to: string) => Math.round(Date.parse(to) - Date.parse(from)) / 1000;

export function processingSnapshot(sent: PredictionSnapshot, startedAt: string): PredictionSnapshot {
  return { ...sent, status: 'processing', startedAt: sent.startedAt ?? startedAt, revision: sent.revision + 1 };
}

/** The prediction once the engine's result is in: what the workflow's success path would write. */
export function succeededSnapshot(sent: PredictionSnapshot, result: PredictResult, completedAt: string): PredictionSnapshot {
  return {
    ...sent,
    status: 'succeeded',
    output: result.output,
    startedAt: sent.startedAt ?? result.startedAt,
    logs: sent.logs + result.logs.map((line) => `${line}\n`).join(''),
    metrics: { ...sent.metrics, ...result.metrics, total_time: seconds(sent.createdAt, completedAt) },
    completedAt,
    revision: sent.revision + ENGINE_REVISIONS,
  };
}
