/** A batch chunk on fake storage and a fake engine: item lines, refusals, reruns and interruption. */
import { Readable } from 'node:stream';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { type BatchChunkDeps, createBatchChunkActivities } from '../../activities/batch-chunk';
import { batchIndexKey, batchInputKey, batchPartKey } from '../../db/batches';
import type { BatchChunkRequest, ChunkResult } from '../../domain/batch-contracts';
import type { PredictResult } from '../../domain/contracts';
import type { Storage } from '../../lib/storage';

/** Object storage in a map: ranged reads (end exclusive, as the activity asks), whole writes. */
function memoryStorage(objects: Map<string, Buffer>): Storage {
  return {
    async read(key: string, opts: { start?: number; end?: number } = {}) {
      const body = objects.get(key);
      if (!body) throw new Error(`no object ${key}`);
      return Readable.from([body.subarray(opts.start ?? 0, opts.end ?? body.length)]);
    },
    async size(key: string) {
      return objects.get(key)?.length;
    },
    async putStream(key: string, body: Readable) {
      const parts: Buffer[] = [];
      for await (const p of body) parts.push(p as Buffer);
      objects.set(key, Buffer.concat(parts));
    },
  } as unknown as Storage;
}

/** A batch of `inputs` in one chunk, as the API writes it: the input lines and their index. */
function batchOf(inputs: Array<Record<string, unknown>>): Map<string, Buffer> {
  const text = Buffer.from(inputs.map((i) => `${JSON.stringify(i)}\n`).join(''));
  const index = Buffer.alloc(16);
  index.writeBigUInt64LE(0n, 0);
  index.writeBigUInt64LE(BigInt(text.length), 8);
  return new Map([
    [batchInputKey('b1'), text],
    [batchIndexKey('b1'), index],
  ]);
}

const chunk = (count: number, extra: Partial<BatchChunkRequest> = {}): BatchChunkRequest => ({
  batchId: 'b1',
  accountId: 'acc_1',
  versionId: 'v1',
  task: 'text-generation',
  chunk: 0,
  first: 0,
  count,
  ...extra,
});

const echo: BatchChunkDeps['runItem'] = async (req) => ({ output: `out:${(req.input as { text: string }).text}` }) as PredictResult;

const partLines = (objects: Map<string, Buffer>) =>
  objects
    .get(batchPartKey('b1', 0))!
    .toString('utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

test('each item gets its line, in order, and the part is written', async () => {
  const objects = batchOf([{ text: 'a' }, { text: 'b' }, { text: 'c' }]);
  const { runBatchChunk } = createBatchChunkActivities({ storage: memoryStorage(objects), nodeId: 'n1', runItem: echo });
  const result: ChunkResult = await new MockActivityEnvironment().run(runBatchChunk, chunk(3));
  expect(result).toEqual({ chunk: 0, completed: 3, failed: 0, canceled: false, nodeId: 'n1' });
  expect(partLines(objects)).toEqual([
    { index: 0, output: 'out:a' },
    { index: 1, output: 'out:b' },
    { index: 2, output: 'out:c' },
  ]);
});

test('an input the model refuses fails its own line, and the batch goes on', async () => {
  const objects = batchOf([{ text: 'a' }, { text: 'bad' }, { text: 'c' }]);
  const runItem: BatchChunkDeps['runItem'] = async (req, ctx, beat) => {
    if ((req.input as { text: string }).text === 'bad')
      throw ApplicationFailure.create({ type: 'InvalidInput', message: 'text is bad', nonRetryable: true });
    return echo(req, ctx, beat);
  };
  const { runBatchChunk } = createBatchChunkActivities({ storage: memoryStorage(objects), nodeId: 'n1', runItem });
  const result: ChunkResult = await new MockActivityEnvironment().run(runBatchChunk, chunk(3));
  expect(result).toMatchObject({ completed: 2, failed: 1 });
  expect(partLines(objects)[1]).toEqual({ index: 1, error: 'InvalidInput: text is bad' });
});

test('a rerun keeps the lines that succeeded and runs the others again, naming its attempt', async () => {
  const objects = batchOf([{ text: 'a' }, { text: 'b' }]);
  objects.set(
    batchPartKey('b1', 0),
    Buffer.from(`${JSON.stringify({ index: 0, output: 'kept' })}\n${JSON.stringify({ index: 1, error: 'x' })}\n`),
  );
  const ran: string[] = [];
  const runItem: BatchChunkDeps['runItem'] = async (req, ctx, beat) => {
    ran.push((req.input as { text: string }).text);
    return echo(req, ctx, beat);
  };
  const { runBatchChunk } = createBatchChunkActivities({ storage: memoryStorage(objects), nodeId: 'n1', runItem });
  await new MockActivityEnvironment().run(runBatchChunk, chunk(2, { rerunAttempt: 2 }));
  expect(ran).toEqual(['b']);
  expect(partLines(objects)).toEqual([
    { index: 0, output: 'kept' },
    { index: 1, output: 'out:b', attempt: 2 },
  ]);
});

test('a node fault fails the chunk with its progress, which the next attempt resumes from', async () => {
  const objects = batchOf([{ text: 'a' }, { text: 'b' }, { text: 'c' }]);
  let calls = 0;
  const failing: BatchChunkDeps['runItem'] = async (req, ctx, beat) => {
    if (++calls === 2) throw new Error('engine died');
    return echo(req, ctx, beat);
  };
  const first = createBatchChunkActivities({ storage: memoryStorage(objects), nodeId: 'n1', runItem: failing });
  const err = (await new MockActivityEnvironment().run(first.runBatchChunk, chunk(3)).catch((e: unknown) => e)) as ApplicationFailure;
  expect(err).toBeInstanceOf(ApplicationFailure);
  expect(err.type).toBe('EngineFault');
  const progress = err.details![0] as { lines: string[] };
  expect(progress.lines).toEqual([JSON.stringify({ index: 0, output: 'out:a' })]);

  const ran: string[] = [];
  const second = createBatchChunkActivities({
    storage: memoryStorage(objects),
    nodeId: 'n2',
    runItem: async (req, ctx, beat) => {
      ran.push((req.input as { text: string }).text);
      return echo(req, ctx, beat);
    },
  });
  const result: ChunkResult = await new MockActivityEnvironment().run(second.runBatchChunk, chunk(3, { resume: progress as never }));
  expect(ran).toEqual(['b', 'c']);
  expect(result).toMatchObject({ completed: 3, nodeId: 'n2' });
});
