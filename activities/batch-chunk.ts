/**
 * One chunk of a batch, on an engine node that holds the model (queue `model:<versionId>`, the
 * same fair queue as predictions, at batch priority). Items run one after another; after each,
 * the chunk's result lines so far are its heartbeat details, so an attempt that dies carries on
 * where the last one stopped. The lines are written once, as the chunk's own part object: a
 * retried chunk replaces its part, so no line is ever written twice.
 */
import { Readable } from 'node:stream';
import { ApplicationFailure, Context, log } from '@temporalio/activity';
import { batchIndexKey, batchInputKey, batchPartKey } from '../db/batches';
import { type BatchChunkRequest, type ChunkProgress, type ChunkResult, chunkProgressOf, furthest } from '../domain/batch-contracts';
import type { PredictRequest, PredictResult } from '../domain/contracts';
import { isNonRetryableType, type KilnFailureType, kilnFailure, RETRYABLE_TYPES } from '../domain/failures';
import type { Storage } from '../lib/storage';
import { succeededLines } from './batch-rerun';

export interface BatchChunkDeps {
  storage?: Storage;
  nodeId: string;
  /** Runs one input as the engine runs a prediction, without its stream, signal or webhooks. */
  runItem(req: PredictRequest, ctx: Context, heartbeat: (details: unknown) => void): Promise<PredictResult>;
}

const HEARTBEAT_MS = 1000;

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** The chunk's input lines, read by byte range through the index. */
async function readChunkInputs(storage: Storage, req: BatchChunkRequest, signal: AbortSignal): Promise<Record<string, unknown>[]> {
  const index = await readAll(await storage.read(batchIndexKey(req.batchId), { start: req.chunk * 8, end: req.chunk * 8 + 16, signal }));
  const start = Number(index.readBigUInt64LE(0));
  const end = Number(index.readBigUInt64LE(8));
  const text = (await readAll(await storage.read(batchInputKey(req.batchId), { start, end, signal }))).toString('utf8');
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  if (lines.length !== req.count)
    throw kilnFailure('EngineFault', `chunk ${req.chunk} has ${lines.length} input lines, expected ${req.count}`);
  return lines.map((l) => JSON.parse(l) as Record<string, unknown>);
}

function failureType(err: unknown): KilnFailureType {
  const type = err instanceof ApplicationFailure ? err.type : undefined;
  return (RETRYABLE_TYPES as Array<string | undefined | null>).includes(type) ? (type as KilnFailureType) : 'EngineFault';
}

/** The predict request of item `index` of a chunk: a prediction of its own, with no row of its own. */
function itemRequest(req: BatchChunkRequest, index: number, input: Record<string, unknown>): PredictRequest {
  const now = new Date().toISOString();
  const id = `${req.batchId}-${index}`;
  return {
    predictionId: id,
    versionId: req.versionId,
    task: req.task,
    input,
    snapshot: {
      id,
      accountId: req.accountId,
      model: '',
      versionId: req.versionId,
      input,
      output: null,
      logs: '',
      error: null,
      status: 'processing',
      metrics: {},
      createdAt: now,
      startedAt: now,
      completedAt: null,
      revision: 0,
    },
  };
}

/**
 * Runs one item: its output line, or the line saying why the model refused its input (`failed`);
 * undefined when the chunk is canceled or the run aborted. Any other failure is thrown.
 */
async function itemLine(
  runItem: BatchChunkDeps['runItem'],
  ctx: Context,
  req: BatchChunkRequest,
  index: number,
  input: Record<string, unknown>,
): Promise<{ text: string; failed: boolean } | undefined> {
  // A retry's lines name its attempt, so which items it ran again can be told from the output.
  const attempt = req.rerunAttempt ? { attempt: req.rerunAttempt } : {};
  try {
    // Item heartbeats (tokens) are dropped: the chunk's timer sends its checkpoint.
    const r = await runItem(itemRequest(req, index, input), ctx, () => undefined);
    if (r.aborted) return undefined;
    return { text: JSON.stringify({ index, output: r.output, ...attempt }), failed: false };
  } catch (err) {
    if (ctx.cancellationSignal.aborted) return undefined;
    if (err instanceof ApplicationFailure && (err.nonRetryable || isNonRetryableType(err.type))) {
      return { text: JSON.stringify({ index, error: `${err.type ? `${err.type}: ` : ''}${err.message}`, ...attempt }), failed: true };
    }
    throw err;
  }
}

export function createBatchChunkActivities({ storage, nodeId, runItem }: BatchChunkDeps) {
  return {
    async runBatchChunk(req: BatchChunkRequest): Promise<ChunkResult> {
      if (!storage) throw kilnFailure('EngineFault', `node ${nodeId} has no object storage for batches`);
      const ctx = Context.current();
      const resumed = furthest(req.resume, chunkProgressOf(ctx.info.heartbeatDetails, req.chunk));
      const progress: ChunkProgress = resumed ?? { chunk: req.chunk, items_done: 0, items: req.count, failed: 0, lines: [] };
      progress.items = req.count;
      progress.node = nodeId;
      if (resumed) log.info('resuming batch chunk', { batchId: req.batchId, chunk: req.chunk, itemsDone: resumed.lines.length });
      const beat = () => ctx.heartbeat({ ...progress, items_done: progress.lines.length });
      beat();
      const timer = setInterval(beat, HEARTBEAT_MS);
      const cancelRequested = () => ctx.cancellationDetails?.cancelRequested === true;
      let canceled = false;
      try {
        const inputs = await readChunkInputs(storage, req, ctx.cancellationSignal);
        // A retry keeps what succeeded before: those lines stand as they are, the rest run again.
        const kept = req.rerunAttempt ? await succeededLines(storage, req.batchId, req.chunk, ctx.cancellationSignal) : undefined;
        for (let k = progress.lines.length; k < req.count; k++) {
          if (ctx.cancellationSignal.aborted) break;
          const index = req.first + k;
          const keptLine = kept?.get(index);
          if (keptLine !== undefined) {
            progress.lines.push(keptLine);
            continue;
          }
          const line = await itemLine(runItem, ctx, req, index, inputs[k]);
          if (line === undefined) break;
          progress.lines.push(line.text);
          if (line.failed) progress.failed += 1;
          progress.items_done = progress.lines.length;
          beat();
        }
        canceled = progress.lines.length < req.count;
        if (canceled && !cancelRequested()) {
          throw kilnFailure(
            'EngineInterrupted',
            `chunk ${req.chunk} interrupted on node ${nodeId} after ${progress.lines.length} of ${req.count} items`,
            [progress],
          );
        }
        const body = progress.lines.length > 0 ? `${progress.lines.join('\n')}\n` : '';
        await storage.putStream(batchPartKey(req.batchId, req.chunk), Readable.from([Buffer.from(body)]));
        return { chunk: req.chunk, completed: progress.lines.length - progress.failed, failed: progress.failed, canceled, nodeId };
      } catch (err) {
        if (err instanceof ApplicationFailure && isNonRetryableType(err.type)) throw err;
        // The checkpoint travels with the failure, so the next attempt (maybe on another node) resumes from it.
        const message = err instanceof Error ? err.message : String(err);
        if (err instanceof ApplicationFailure && err.details?.length) throw err;
        throw kilnFailure(failureType(err), message, [{ ...progress, items_done: progress.lines.length }]);
      } finally {
        clearInterval(timer);
      }
    },
  };
}
