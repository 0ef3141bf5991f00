/**
 * A waiting prediction's place in its version's fair queue (`queue` in the prediction's JSON),
 * and the estimate a create with `max_queue_seconds` is refused on. The policy is
 * domain/queue-estimate.ts; this reads what it needs.
 */
import type { Account } from '../db/accounts';
import type { Db } from '../db/client';
import { getVersion } from '../db/models';
import { recentLiveNodes } from '../db/nodes';
import { readQueue } from '../db/queue';
import { servingNodes } from '../domain/node-placement';
import { estimateQueue } from '../domain/queue-estimate';

export interface QueueView {
  /** 1: the next to start; counts every account's predictions ahead of it in the fair queue's order. */
  position: number;
  /** This account's own predictions ahead of it. */
  ahead: number;
  /** Seconds until it should start; null until the version has served predictions recently on a live node. */
  eta_seconds: number | null;
  /** When it began to wait. */
  since: string;
}

export interface QueueDeps {
  db: Db;
  /** Sequences a node gives a version whose settings name none (KILN_ENGINE_SEQUENCES). */
  defaultSequences: number;
}

// Node rows change with heartbeats, seconds apart: a poll of many waiting predictions reads them once a second.
const queueLiveNodes = recentLiveNodes(1_000);

/** Slots serving the version now: its live nodes times the sequences each gives it. */
async function slotsServing(deps: QueueDeps, versionId: string): Promise<number> {
  const [nodes, version] = await Promise.all([queueLiveNodes(deps.db), getVersion(deps.db, versionId)]);
  const sequences = typeof version?.settings?.sequences === 'number' ? version.settings.sequences : deps.defaultSequences;
  return servingNodes(nodes, versionId).length * sequences;
}

/** Where `prediction` (or, without one, a prediction created now) stands in `versionId`'s queue. */
export async function queuePosition(
  deps: QueueDeps,
  account: Account,
  versionId: string,
  prediction?: { id: string; createdAt: Date },
): Promise<QueueView> {
  const [reading, slots] = await Promise.all([readQueue(deps.db, versionId, account.id, prediction), slotsServing(deps, versionId)]);
  const mineKey = account.fairnessGroup ?? account.id;
  const mine = reading.waiting.find((w) => w.key === mineKey);
  const estimate = estimateQueue({
    mine: { weight: account.fairnessWeight, earlier: mine?.earlier ?? 0 },
    others: reading.waiting.filter((w) => w.key !== mineKey),
    running: reading.running,
    slots,
    serviceSeconds: reading.serviceSeconds,
    handoverSeconds: reading.handoverSeconds,
  });
  return {
    position: estimate.position,
    ahead: mine?.accountEarlier ?? 0,
    eta_seconds: estimate.etaSeconds,
    since: (prediction?.createdAt ?? new Date()).toISOString(),
  };
}
