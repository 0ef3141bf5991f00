/** Which events of a prediction's stream a follower (api/prediction-stream.ts) passes on, and how. */
import type { PredictionEventRow } from '../db/events';
import type { PredictionStatus } from '../domain/statuses';

/**
 * Whether a read event goes to the reader, and if so whether it is void: output before the last
 * reset (`replayFrom`) belongs to a failed attempt, and goes only to a reader that asked for it; an
 * `attempt` event changes nothing for a reader.
 */
export function passedOn(row: PredictionEventRow, replayFrom: number, withVoided: boolean): { voided: boolean } | undefined {
  const voided = row.event === 'output' && row.id < replayFrom;
  if ((voided && !withVoided) || row.event === 'attempt') return undefined;
  return { voided };
}

/** The `done` event of a prediction that ended without one (made before streams existed), after the last read. */
export function doneWithoutEvent(
  predictionId: string,
  after: { id: number; seq: number },
  status: PredictionStatus,
  now = new Date(),
): PredictionEventRow {
  const data = status === 'succeeded' ? '{}' : JSON.stringify({ reason: status });
  return { id: after.id + 1, seq: after.seq + 1, predictionId, event: 'done', data, attempt: 1, tokens: null, createdAt: now };
}
