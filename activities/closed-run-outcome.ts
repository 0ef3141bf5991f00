/**
 * What a prediction or batch whose workflow closed early becomes (activities/reconciler.ts): pure
 * functions of its last state, its row and how its run ended.
 */
import type { BatchRow } from '../db/batches';
import { type BatchSnapshot } from '../domain/batch-contracts';
import { ENGINE_REVISIONS } from '../domain/engine-projection';
import { type PredictionSnapshot } from '../domain/prediction-snapshot';

/** How a workflow ended, from its close event. */
export interface ClosedRun {
  runId: string;
  status: 'COMPLETED' | 'FAILED' | 'CANCELLED' | 'TERMINATED' | 'TIMED_OUT' | 'CONTINUED_AS_NEW';
  closeTime: Date;
  /** Why, in words: the operator's reason, the failure's message. */
  reason: string;
}

/** The status and error a prediction or batch gets from how its workflow ended early. */
export function outcomeOf(run: ClosedRun): { status: 'failed' | 'canceled'; error: string | null; logLine: string } {
  switch (run.status) {
    case 'CANCELLED':
      return { status: 'canceled', error: null, logLine: 'Canceled: the workflow was canceled before its last step' };
    case 'TERMINATED': {
      const error = `terminated by an operator: ${run.reason || 'no reason given'}`;
      return { status: 'failed', error, logLine: `Error: ${error}` };
    }
    case 'TIMED_OUT':
      return {
        status: 'failed',
        error: 'the workflow timed out before it finished',
        logLine: 'Error: the workflow timed out before it finished',
      };
    default: {
      const error = `the workflow failed before its last step: ${run.reason || 'no reason given'}`;
      return { status: 'failed', error, logLine: `Error: ${error}` };
    }
  }
}

const seconds = (from: string, to: string) => Math.round(Date.parse(to) - Date.parse(from)) / 1000;

/**
 * A prediction's final snapshot after its run closed early (not completed): its last state with
 * the close's outcome, timings to the close, and a revision past everything written before.
 */
export function predictionClosedEarly(state: PredictionSnapshot, rowRevision: number, run: ClosedRun): PredictionSnapshot {
  const outcome = outcomeOf(run);
  const completedAt = run.closeTime.toISOString();
  const metrics: Record<string, number | string> = { ...state.metrics, total_time: seconds(state.createdAt, completedAt) };
  if (state.startedAt) metrics.predict_time ??= seconds(state.startedAt, completedAt);
  return {
    ...state,
    status: outcome.status,
    error: outcome.error,
    logs: `${state.logs}${outcome.logLine}\n`,
    metrics,
    completedAt,
    // After everything the run wrote, the engine's writes for the attempt it was waiting on
    // included (a late final write of that attempt loses), and after whatever the row holds.
    revision: Math.max(state.revision + ENGINE_REVISIONS, rowRevision) + 1,
  };
}

/** A batch's final snapshot after its run closed early (not completed). */
export function batchClosedEarly(state: BatchSnapshot, rowRevision: number, run: ClosedRun): BatchSnapshot {
  const outcome = outcomeOf(run);
  return {
    ...state,
    status: outcome.status,
    error: outcome.error,
    logs: `${state.logs}${outcome.logLine}\n`,
    completedAt: run.closeTime.toISOString(),
    revision: Math.max(state.revision, rowRevision) + 1,
  };
}

/** A batch's row as its workflow's snapshot. */
export function batchRowToSnapshot(row: BatchRow): BatchSnapshot {
  return {
    ...row,
    createdAt: row.createdAt.toISOString(),
    startedAt: row.startedAt?.toISOString() ?? null,
    completedAt: row.completedAt?.toISOString() ?? null,
  };
}
