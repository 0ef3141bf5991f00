/** Data that crosses the batch workflow's boundary. Plain JSON only. */
import type { PredictionPriority, RetryPolicy } from './contracts';
import type { BatchStatus } from './statuses';

export interface BatchArgs {
  id: string;
  accountId: string;
  /** `owner/name`, as shown in the batch JSON. */
  model: string;
  versionId: string;
  task: string;
  total: number;
  chunkSize: number;
  /** Where the inputs came from: `inline`, `file:<id>` or the URL. */
  source: string;
  createdAt: string;
  /** Fair-queue key and weight of the account, at batch level (below interactive and default work). */
  priority: PredictionPriority;
  retry?: RetryPolicy;
  /** Chunks run at once. */
  parallelism: number;
  /** Chunks one run of the workflow starts before it continues as new, keeping its history short. */
  chunksPerRun: number;
  /** Set on a retry (POST /v1/batches/{id}/retry): the run redoes only the items that did not succeed. */
  rerun?: { attempt: number };
}

/**
 * What a retry redoes, read from the parts the earlier attempts wrote: the chunks with an item
 * that failed or never ran, and the counts of the chunks left as they are.
 */
export interface RerunPlan {
  chunks: number[];
  /** Chunks of `chunks` with no part at all (never ran): an output written before they do leaves them out. */
  missing: number[];
  completed: number;
  failed: number;
}

/** What one run hands the next when it continues as new: every chunk below `nextChunk` is done. */
export interface BatchCarry {
  nextChunk: number;
  completed: number;
  failed: number;
  revision: number;
  startedAt: string | null;
  logs: string;
  /** Runs so far, this one included. */
  runs: number;
  /** A retry's plan: `nextChunk` is then a position in `rerun.chunks`. */
  rerun?: RerunPlan;
}

export interface BatchChunkRequest {
  batchId: string;
  accountId: string;
  versionId: string;
  task: string;
  chunk: number;
  /** The chunk holds the batch's items `first` to `first + count - 1`. */
  first: number;
  count: number;
  /** Progress of an earlier attempt of this chunk, to carry on from. */
  resume?: ChunkProgress;
  /** A retry's attempt: the chunk keeps the succeeded lines of its part and runs the other items again. */
  rerunAttempt?: number;
}

/**
 * A chunk's checkpoint: the result lines of its first `lines.length` items. It is the activity's
 * heartbeat details, and the workflow keeps the latest one it saw when an attempt fails.
 */
export interface ChunkProgress {
  chunk: number;
  /** The node the attempt ran on. */
  node?: string;
  items_done: number;
  items: number;
  failed: number;
  lines: string[];
}

export interface ChunkResult {
  chunk: number;
  completed: number;
  failed: number;
  /** The batch was canceled: the part holds only the items finished before that. */
  canceled: boolean;
  nodeId: string;
}

export const batchWorkflowId = (id: string): string => `batch-${id}`;

/** A chunk's progress from heartbeat details (or a failure's details), when they are about that chunk. */
export function chunkProgressOf(details: unknown, chunk: number): ChunkProgress | undefined {
  const d = details as Partial<ChunkProgress> | undefined;
  if (!d || d.chunk !== chunk || !Array.isArray(d.lines)) return undefined;
  return { chunk, node: d.node, items_done: d.lines.length, items: Number(d.items ?? 0), failed: Number(d.failed ?? 0), lines: d.lines };
}

/** The further along of two checkpoints of one chunk. */
export function furthest(a: ChunkProgress | undefined, b: ChunkProgress | undefined): ChunkProgress | undefined {
  if (!a) return b;
  if (!b) return a;
  return b.lines.length > a.lines.length ? b : a;
}

/** What the batch workflow knows at one transition; written whole, guarded by its revision. */
export interface BatchSnapshot {
  id: string;
  accountId: string;
  model: string;
  versionId: string;
  status: BatchStatus;
  total: number;
  completed: number;
  failed: number;
  chunkSize: number;
  source: string;
  error: string | null;
  logs: string;
  outputFileId: string | null;
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
  revision: number;
  /** Set by a retry's run only (a first run's row keeps the default, 1). */
  attempt?: number;
}
