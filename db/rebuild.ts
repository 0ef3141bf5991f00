import type { Db } from './client';
import { snapshotToRow, type PredictionSnapshot } from './predictions';
import { predictions } from './schema';
import { withoutNul } from './sanitize';

/**
 * Replaces the whole predictions projection with the given snapshots, in one transaction, so
 * readers see either the old table or the rebuilt one.
 */
export async function replacePredictions(db: Db, snapshots: PredictionSnapshot[]): Promise<number> {
  return db.transaction(async (tx) => {
    await tx.delete(predictions);
    for (let i = 0; i < snapshots.length; i += 500) {
      const rows = snapshots.slice(i, i + 500).map((s) => snapshotToRow(withoutNul(s)));
      if (rows.length > 0) await tx.insert(predictions).values(rows);
    }
    return snapshots.length;
  });
}
