/**
 * Prefill/decode disaggregation, policy side: engine nodes take a role, and a long prompt is
 * prefilled on a `prefill` node, which writes its KV snapshot to the object tier, then decoded on a
 * `decode` node, which restores that snapshot and streams. Prefill is compute-bound (the whole
 * prompt at once) and decode memory-bound (one token a step): apart, a long prompt no longer stalls
 * the streams decoding beside it. Placement counts tokens: prefill work goes to the node with the
 * fewest prompt tokens in flight, decode work to the node with the fewest active sequences, then
 * the fewest KV bytes. Pure: the control worker's placement and the API call it with the live nodes.
 */
import type { NodeCapacity } from './node-placement';

export const ENGINE_ROLES = ['prefill', 'decode', 'both'] as const;
/** `both` (the default) prefills and decodes its own predictions: one laptop stays one command. */
export type EngineRole = (typeof ENGINE_ROLES)[number];

/** What a node is doing now, as its last heartbeat said. */
export interface NodeLoad {
  /** Prompt tokens of the prefills (and generations still evaluating their prompt) running there. */
  promptTokensInFlight: number;
  /** Sequences generating there. */
  activeSequences: number;
  /** Bytes of KV cache those sequences hold. */
  kvBytes: number;
}

export const IDLE_LOAD: NodeLoad = { promptTokensInFlight: 0, activeSequences: 0, kvBytes: 0 };

/** A live node as the split's placement sees it. */
export interface RoledNode extends NodeCapacity {
  role?: EngineRole | string;
  load?: NodeLoad | null;
}

/**
 * A prompt's length in tokens, cheaply and without the model's tokenizer: about four characters of
 * English per token in the BPE and SentencePiece vocabularies. It decides only whether a prompt
 * is long enough to be worth a split; the engine counts the real tokens.
 */
export function estimatePromptTokens(input: { prompt?: unknown; messages?: unknown }): number {
  let chars = 0;
  if (typeof input.prompt === 'string') chars += input.prompt.length;
  if (Array.isArray(input.messages)) {
    for (const m of input.messages as Array<{ content?: unknown }>) {
      if (typeof m?.content === 'string') chars += m.content.length;
    }
  }
  return Math.ceil(chars / 4);
}

/** A split's two nodes. */
export interface SplitChoice<N> {
  prefill: N;
  decode: N;
}

const loadOf = (n: RoledNode): NodeLoad => ({ ...IDLE_LOAD, ...n.load });

/** Prefill: the fewest prompt tokens in flight; a node holding the version goes first on a tie (no load to wait for). */
function byPrefillLoad(versionId: string) {
  return (a: RoledNode, b: RoledNode) =>
    loadOf(a).promptTokensInFlight - loadOf(b).promptTokensInFlight ||
    Number(holdsVersion(b, versionId)) - Number(holdsVersion(a, versionId));
}

/** Decode: the fewest active sequences, then the fewest KV bytes, then one that holds the version. */
function byDecodeLoad(versionId: string) {
  return (a: RoledNode, b: RoledNode) =>
    loadOf(a).activeSequences - loadOf(b).activeSequences ||
    loadOf(a).kvBytes - loadOf(b).kvBytes ||
    Number(holdsVersion(b, versionId)) - Number(holdsVersion(a, versionId));
}

const holdsVersion = (n: RoledNode, versionId: string) => n.loaded.some((l) => l.versionId === versionId);

/**
 * Whether a prompt is worth a split: long enough (`minTokens`, KILN_PREFILL_SPLIT_MIN_TOKENS), with
 * a `prefill` node live. The API asks, so that other predictions' workflows never ask placement.
 */
export function splitCandidate(live: RoledNode[], promptTokens: number, minTokens: number): boolean {
  return promptTokens >= minTokens && live.some((n) => n.role === 'prefill') && live.some((n) => n.role === 'decode');
}

/**
 * The nodes of a split for `versionId`, or undefined where there is not both a live `prefill` node
 * and a live `decode` node for it (nodes of role `both` keep their work whole). `excludeNodes`
 * (nodes that failed this prediction) are left out. Only nodes that hold the version, or have the
 * memory to load it, are candidates.
 */
export function chooseSplit<N extends RoledNode>(
  live: N[],
  { versionId, memoryBytes, excludeNodes = [] }: SplitRequest,
): SplitChoice<N> | undefined {
  const fits = (n: N) =>
    !excludeNodes.includes(n.id) &&
    (holdsVersion(n, versionId) || n.memoryBytes - n.loaded.reduce((s, l) => s + l.memoryBytes, 0) >= memoryBytes);
  const prefill = live.filter((n) => n.role === 'prefill' && fits(n)).sort(byPrefillLoad(versionId))[0];
  const decode = live.filter((n) => n.role === 'decode' && fits(n)).sort(byDecodeLoad(versionId))[0];
  return prefill && decode ? { prefill, decode } : undefined;
}

export interface SplitRequest {
  versionId: string;
  /** The version's memory: a node that does not hold it must have this much free. */
  memoryBytes: number;
  excludeNodes?: string[];
}
