/**
 * The output of a prediction that is still running, as Replicate shows it: what a streaming task
 * (text generation) has produced so far, read from its stream log. The projection keeps its
 * output empty until the end, so tokens cost no row write each.
 */
import type { Db } from '../db/client';
import { outputChunks } from '../db/events';
import type { PredictionRow } from '../db/predictions';
import { isTerminalStatus } from '../domain/statuses';

export async function withOutputSoFar(db: Db, row: PredictionRow): Promise<PredictionRow> {
  if (isTerminalStatus(row.status)) return row;
  // Only streaming tasks write output events before the end (a failed attempt's voided output is left out).
  const chunks = await outputChunks(db, row.id);
  return chunks.length > 0 ? { ...row, output: chunks } : row;
}
