/**
 * Where a model version goes: pure placement policy over the live nodes' memory, shared by the
 * control worker's placement and replica scaler and by the API's create (which takes a node that
 * already serves the version). Memory-aware bin-packing: a version goes to the fullest node that
 * still has room, so big nodes stay free for big models (docs/architecture.md).
 */
import type { LoadedVersion } from './statuses';

/** A live node as placement sees it: its memory, and what it holds. */
export interface NodeCapacity {
  id: string;
  memoryBytes: number;
  loaded: Array<Pick<LoadedVersion, 'versionId' | 'memoryBytes'>>;
  /** KILN_ENGINE_ROLE: a `prefill` node takes only prefills (domain/prefill-split.ts); absent means `both`. */
  role?: string;
}

/** A `prefill` node only prefills: predictions go to the others. */
const takesPredictions = (n: NodeCapacity): boolean => n.role !== 'prefill';

export const freeBytes = (n: NodeCapacity): number => n.memoryBytes - n.loaded.reduce((s, l) => s + l.memoryBytes, 0);

export const holds = (n: NodeCapacity, versionId: string): boolean => n.loaded.some((l) => l.versionId === versionId);

/** The nodes that serve the version now. */
export const servingNodes = <N extends NodeCapacity>(nodes: N[], versionId: string): N[] =>
  nodes.filter((n) => takesPredictions(n) && holds(n, versionId));

/** Nodes that failed this prediction are a last resort, not a first choice. */
export function placementCandidates<N extends NodeCapacity>(live: N[], excludeNodes: string[]): N[] {
  const predicting = live.filter(takesPredictions);
  const others = predicting.filter((n) => !excludeNodes.includes(n.id));
  return others.length > 0 ? others : predicting;
}

/** What a cold version needs: its own memory, and its LoRA base's where the base is not loaded. */
export interface ColdVersion {
  memoryBytes: number;
  loraBase?: string;
  baseBytes?: number;
}

/** The memory the version takes on that node. */
export function memoryNeeded(n: NodeCapacity, v: ColdVersion): number {
  return v.memoryBytes + (v.loraBase !== undefined && !holds(n, v.loraBase) ? (v.baseBytes ?? 0) : 0);
}

/**
 * The node to load a cold version on: among those with room, a node holding its LoRA base first,
 * then the fullest; with no room anywhere, the node with the most memory (it evicts idle models).
 * `fits` is false when even that node's whole memory is too small: the model is too large.
 */
export function coldNodeFor<N extends NodeCapacity>(candidates: N[], v: ColdVersion): { node: N; need: number; fits: boolean } | undefined {
  const holdsBase = (n: N) => v.loraBase !== undefined && holds(n, v.loraBase);
  const withRoom = candidates
    .filter((n) => freeBytes(n) >= memoryNeeded(n, v))
    .sort((a, b) => Number(holdsBase(b)) - Number(holdsBase(a)) || freeBytes(a) - freeBytes(b));
  const node =
    withRoom[0] ?? [...candidates].sort((a, b) => Number(holdsBase(b)) - Number(holdsBase(a)) || b.memoryBytes - a.memoryBytes)[0];
  if (!node) return undefined;
  const need = memoryNeeded(node, v);
  return { node, need, fits: node.memoryBytes >= need };
}

/**
 * `coldNodeFor` among the nodes this prediction has not failed on, unless only one it failed on
 * is big enough: that one is tried again rather than the model called too large.
 */
export function coldNodeAvoiding<N extends NodeCapacity>(
  live: N[],
  excludeNodes: string[],
  v: ColdVersion,
): { node: N; need: number; fits: boolean } | undefined {
  const avoiding = coldNodeFor(placementCandidates(live, excludeNodes), v);
  if (!avoiding || avoiding.fits || excludeNodes.length === 0) return avoiding;
  return coldNodeFor(placementCandidates(live, []), v);
}

/** The replica bounds of a version: its deployment's, or the default cap. */
export interface ReplicaLimits {
  min: number;
  max: number;
}

/**
 * Why a version needs one more replica, or undefined: below min_instances, or (between one
 * replica and max) a backlog of `backlogPerReplica` or more per replica. `waiting` is asked only
 * when it matters (it costs a call to Temporal).
 */
export async function replicaReason(
  replicas: number,
  limits: ReplicaLimits,
  backlogPerReplica: number,
  waiting: () => Promise<number>,
): Promise<string | undefined> {
  if (replicas < limits.min) return `min_instances ${limits.min}`;
  if (replicas === 0 || replicas >= limits.max) return undefined;
  const backlog = await waiting();
  return backlog >= backlogPerReplica * replicas ? `backlog ${backlog} on ${replicas} replica(s)` : undefined;
}

/**
 * Which nodes hold each version as a replica: a prefill node's copy serves no predictions, so it is
 * no replica.
 */
export function replicaHolders(live: NodeCapacity[]): Map<string, Set<string>> {
  const holders = new Map<string, Set<string>>();
  for (const n of live.filter(takesPredictions))
    for (const l of n.loaded) holders.set(l.versionId, (holders.get(l.versionId) ?? new Set()).add(n.id));
  return holders;
}

/** Best fit for a replica: the fullest node that does not hold the version and still has room. */
export function replicaNodeFor<N extends NodeCapacity>(
  live: N[],
  free: Map<string, number>,
  holders: Set<string>,
  memoryBytes: number,
): N | undefined {
  return live
    .filter((n) => takesPredictions(n) && !holders.has(n.id) && (free.get(n.id) ?? 0) >= memoryBytes)
    .sort((a, b) => (free.get(a.id) ?? 0) - (free.get(b.id) ?? 0))[0];
}
