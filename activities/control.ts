/** Cheap activities run by the control worker: admission, placement and projection. */
import { log } from '@temporalio/activity';
import type { Db } from '../db/client';
import { getVersion } from '../db/models';
import { liveNodes } from '../db/nodes';
import { admit, release } from '../db/admissions';
import { writePredictionSnapshot, type PredictionSnapshot } from '../db/predictions';
import { recordUsage, type UsageRecord } from '../db/usage';
import { accounts, isTerminalStatus } from '../db/schema';
import { eq } from 'drizzle-orm';
import { kilnFailure } from '../workflows/failures';
import { observePrediction } from '../lib/metrics';

import type { Placement } from '../workflows/types';

export interface ControlDeps {
  db: Db;
}

export function createControlActivities({ db }: ControlDeps) {
  return {
    async projectPrediction(snapshot: PredictionSnapshot): Promise<void> {
      const applied = await writePredictionSnapshot(db, snapshot);
      // Counted once: a retried or late write of the same transition is not applied again.
      if (applied && isTerminalStatus(snapshot.status)) observePrediction(snapshot);
    },

    /**
     * Takes one of the account's admission slots (max_running). When they are all held, the
     * prediction waits (a plain error: Temporal retries with backoff) or, if the account says
     * so, fails with OverCapacity.
     */
    async admitPrediction({ predictionId, accountId, versionId }: { predictionId: string; accountId: string; versionId: string }): Promise<void> {
      const account = await db.query.accounts.findFirst({ where: eq(accounts.id, accountId) });
      if (!account || account.disabled) throw kilnFailure('AccountDisabled', `account ${accountId} is disabled`);
      if (!(await getVersion(db, versionId))) {
        throw kilnFailure('ModelVersionNotFound', `model version ${versionId} does not exist`);
      }
      const { admitted, held } = await admit(db, predictionId, accountId, account.maxRunning);
      if (admitted) return;
      const message = `account ${account.username} has ${held} predictions admitted (max_running ${account.maxRunning})`;
      if (account.overCap === 'refuse') throw kilnFailure('OverCapacity', `${message}; this account refuses work over its cap`);
      throw new Error(`${message}; waiting for a slot`);
    },

    async releaseAdmission({ predictionId }: { predictionId: string }): Promise<void> {
      await release(db, predictionId);
    },

    async recordUsage(record: UsageRecord): Promise<void> {
      await recordUsage(db, record);
    },

    /**
     * A node that already serves the version, or else best fit: the live node with the least
     * free memory that still holds it, so big nodes stay free for big models (bin-packing).
     * No live node is a retryable fault: one may come up.
     */
    async placeModel({ versionId, excludeNodes = [] }: { versionId: string; excludeNodes?: string[] }): Promise<Placement> {
      const version = await getVersion(db, versionId);
      if (!version) throw kilnFailure('ModelVersionNotFound', `model version ${versionId} does not exist`);
      const live = await liveNodes(db);
      // Nodes that failed this prediction are a last resort, not a first choice.
      const others = live.filter((n) => !excludeNodes.includes(n.id));
      const candidates = others.length > 0 ? others : live;
      if (candidates.length === 0) throw new Error('no engine node is up');
      const serving = candidates.filter((n) => n.loaded.some((l) => l.versionId === versionId));
      if (serving.length > 0) {
        return { nodeId: serving[Math.floor(Math.random() * serving.length)].id, warm: true };
      }
      const free = (n: (typeof candidates)[number]) => n.memoryBytes - n.loaded.reduce((s, l) => s + l.memoryBytes, 0);
      const fits = candidates.filter((n) => free(n) >= version.memoryBytes).sort((a, b) => free(a) - free(b));
      // Nothing has room now: the node with the most memory evicts idle models to make it.
      const best = fits[0] ?? candidates.sort((a, b) => b.memoryBytes - a.memoryBytes)[0];
      if (best.memoryBytes < version.memoryBytes) {
        throw kilnFailure('ModelTooLarge', `model needs ${version.memoryBytes} B; the largest node has ${best.memoryBytes} B`);
      }
      log.info('placing model', { versionId, nodeId: best.id, freeBytes: free(best) });
      return { nodeId: best.id, warm: false };
    },
  };
}
