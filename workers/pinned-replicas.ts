/**
 * Which of a node's loaded versions are pinned: kept loaded past their idle TTL and never
 * evicted. Every node decides alone, from the same rows, so they agree without talking.
 */
import type { ReplicaLimits } from '../db/deployments';

export interface PinningInput {
  nodeId: string;
  nodeMemoryBytes: number;
  /** The share of the node one account's pinned replicas may hold (KILN_PINNED_NODE_SHARE). */
  share: number;
  /** This node's loaded versions and the memory each holds. */
  served: ReadonlyMap<string, number>;
  limits: ReadonlyMap<string, ReplicaLimits>;
  /** The live nodes and the versions each holds. */
  live: ReadonlyArray<{ id: string; loaded: ReadonlyArray<{ versionId: string }> }>;
}

/**
 * Of the nodes holding a version, those first by id keep its min_instances, so replicas beyond
 * the minimum (added for a backlog) still scale to zero when idle. Then one account's pinned
 * replicas hold at most `share` of this node: past it (in version id order, so the choice is the
 * same at every heartbeat) a replica is not pinned here and goes like any idle model, and the
 * replica scaler puts it back only where there is free room. A version pinned by several
 * accounts is charged to the first that still has room.
 */
export function pinnedVersions(input: PinningInput): Set<string> {
  const budget = input.nodeMemoryBytes * input.share;
  const charged = new Map<string, number>();
  const pinned = new Set<string>();
  for (const [versionId, limits] of [...input.limits].sort(([a], [b]) => a.localeCompare(b))) {
    const bytes = input.served.get(versionId);
    if (limits.min === 0 || bytes === undefined) continue;
    const holders = input.live
      .filter((n) => n.loaded.some((l) => l.versionId === versionId))
      .map((n) => n.id)
      .sort();
    const rank = holders.indexOf(input.nodeId);
    if (rank < 0 || rank >= limits.min) continue;
    const payer = limits.pinnedBy.find((account) => (charged.get(account) ?? 0) + bytes <= budget);
    if (payer === undefined) continue;
    charged.set(payer, (charged.get(payer) ?? 0) + bytes);
    pinned.add(versionId);
  }
  return pinned;
}
