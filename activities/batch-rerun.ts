/**
 * A batch retry redoes the items that did not succeed, and only those: an item whose result line
 * holds an error, or that has no line (its chunk failed before it, or the batch was canceled).
 * Both the plan (which chunks to run again) and a rerun chunk (which lines it keeps) read a
 * chunk's part this way.
 */
import { batchPartKey } from '../db/batches';
import type { RerunPlan } from '../domain/batch-contracts';
import type { Storage } from '../lib/storage';

/** The succeeded lines of a chunk's part by item index; undefined when the chunk has no part. */
export async function succeededLines(
  storage: Storage,
  batchId: string,
  chunk: number,
  signal?: AbortSignal,
): Promise<Map<number, string> | undefined> {
  if ((await storage.size(batchPartKey(batchId, chunk))) === undefined) return undefined;
  const pieces: Buffer[] = [];
  for await (const piece of await storage.read(batchPartKey(batchId, chunk), { signal })) pieces.push(piece as Buffer);
  const kept = new Map<number, string>();
  for (const line of Buffer.concat(pieces).toString('utf8').split('\n')) {
    if (line.trim() === '') continue;
    const parsed = JSON.parse(line) as { index: number; error?: unknown };
    if (parsed.error === undefined) kept.set(parsed.index, line);
  }
  return kept;
}

export async function planRerun(
  storage: Storage,
  req: { batchId: string; total: number; chunkSize: number },
  signal: AbortSignal,
  progress: (done: number, chunks: number) => void,
): Promise<RerunPlan> {
  const chunks = Math.ceil(req.total / req.chunkSize);
  const plan: RerunPlan = { chunks: [], missing: [], completed: 0, failed: 0 };
  for (let chunk = 0; chunk < chunks; chunk++) {
    const count = Math.min(req.chunkSize, req.total - chunk * req.chunkSize);
    const kept = await succeededLines(storage, req.batchId, chunk, signal);
    if (!kept) plan.missing.push(chunk);
    if (!kept || kept.size < count) plan.chunks.push(chunk);
    else plan.completed += count;
    progress(chunk + 1, chunks);
  }
  return plan;
}
