/**
 * The history archive copies each closed run once, into one bundle a look, and lists most looks
 * from just before its mark: what a look costs Temporal and the bucket is what these count.
 */
import type { Client } from '@temporalio/client';
import { loadDataConverter } from '@temporalio/common/lib/internal-non-workflow';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { temporal } from '@temporalio/proto';
import Long from 'long';
import { ArchiveMemory, archiveClosedHistories, archivedHistories, archivedThrough, resultOf } from '../../activities/history-archive';
import type { Storage } from '../../lib/storage';

/** A bucket in memory that counts what is asked of it. */
function fakeBucket() {
  const objects = new Map<string, Buffer>();
  const calls = { size: 0, put: 0 };
  const storage = {
    async size(key: string) {
      calls.size += 1;
      return objects.get(key)?.length;
    },
    async read(key: string) {
      return [objects.get(key)!];
    },
    async putBytes(key: string, body: Buffer | string) {
      calls.put += 1;
      objects.set(key, Buffer.from(body));
    },
    async *list(prefix: string) {
      yield [...objects.keys()].filter((k) => k.startsWith(prefix)).sort();
    },
  };
  return { objects, calls, storage: storage as unknown as Storage };
}

type Run = { workflowId: string; runId: string; closeTime: Date };

const converter = loadDataConverter();

/** A history of one event: the run completed, with its own name as its result (so a read-back can be matched to its run). */
const historyOf = (r: { workflowId: string; runId: string }) => ({
  events: [
    {
      eventId: Long.fromNumber(1),
      eventType: temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
      workflowExecutionCompletedEventAttributes: {
        result: { payloads: [converter.payloadConverter.toPayload(`${r.workflowId}/${r.runId}`)] },
      },
    },
  ],
});

/** Temporal's visibility and histories as the archive reads them. */
function fakeTemporal(runs: Run[]) {
  const fetched: string[] = [];
  const listedFrom: Date[] = [];
  const client = {
    workflow: {
      async *list({ query }: { query: string }) {
        const from = new Date(/CloseTime > '([^']+)'/.exec(query)![1]);
        listedFrom.push(from);
        yield* runs.filter((r) => r.closeTime > from);
      },
      getHandle(workflowId: string, runId: string) {
        return {
          async fetchHistory() {
            fetched.push(`${workflowId}/${runId}`);
            return historyOf({ workflowId, runId });
          },
        };
      },
    },
  };
  return { fetched, listedFrom, runs, client: client as unknown as Client };
}

const run = (n: number, closedSecondsAgo: number): Run => ({
  workflowId: `prediction-${n}`,
  runId: `run-${n}`,
  closeTime: new Date(Date.now() - closedSecondsAgo * 1000),
});

async function readBack(storage: Storage) {
  const out: Array<{ run: string; closedAt: number; result: string | undefined }> = [];
  for await (const r of archivedHistories(storage))
    out.push({ run: `${r.workflowId}/${r.runId}`, closedAt: r.closedAt, result: await resultOf<string>(r, converter) });
  return out;
}

test('a look copies its closed runs into one bundle, and a later look lists them again but fetches and writes nothing', async () => {
  const bucket = fakeBucket();
  const temporal = fakeTemporal([run(1, 30), run(2, 20), run(3, 10)]);
  const memory = new ArchiveMemory();
  expect(await archiveClosedHistories(temporal.client, bucket.storage, 10_000, memory)).toEqual({ archived: 3, complete: true });
  expect(temporal.fetched).toEqual(['prediction-1/run-1', 'prediction-2/run-2', 'prediction-3/run-3']);
  // One bundle and the mark: two writes for three runs.
  expect(bucket.calls.put).toBe(2);
  expect((await archivedThrough(bucket.storage))?.getTime()).toBe(temporal.runs[2].closeTime.getTime());
  expect(await readBack(bucket.storage)).toEqual(
    temporal.runs.map((r) => ({
      run: `${r.workflowId}/${r.runId}`,
      closedAt: r.closeTime.getTime(),
      result: `${r.workflowId}/${r.runId}`,
    })),
  );
  const after = { ...bucket.calls };
  temporal.runs.push(run(4, 1));
  expect(await archiveClosedHistories(temporal.client, bucket.storage, 10_000, memory)).toEqual({ archived: 1, complete: true });
  expect(temporal.fetched).toHaveLength(4);
  // A bundle of run 4 and the mark moved to it; no HEAD for the runs already copied.
  expect(bucket.calls).toEqual({ size: after.size, put: after.put + 2 });
  expect(await archiveClosedHistories(temporal.client, bucket.storage, 10_000, memory)).toEqual({ archived: 0, complete: true });
  expect(bucket.calls.put).toBe(after.put + 2);
});

test('most looks list from just before the mark, and one a minute from a minute before the previous such look began', async () => {
  const bucket = fakeBucket();
  const temporal = fakeTemporal([run(1, 5)]);
  const memory = new ArchiveMemory();
  await archiveClosedHistories(temporal.client, bucket.storage, 10_000, memory);
  const mark = (await archivedThrough(bucket.storage))!.getTime();
  await archiveClosedHistories(temporal.client, bucket.storage, 10_000, memory);
  // The first look had no mark: it listed from a minute before the epoch. The second, a short one.
  expect(temporal.listedFrom.map((d) => d.getTime())).toEqual([0 - 60_000, mark - 5_000]);
  // A run that closed 30 s before the mark but is listed only now: the next wide look copies it.
  temporal.runs.push({ workflowId: 'prediction-late', runId: 'run-late', closeTime: new Date(mark - 30_000) });
  await archiveClosedHistories(temporal.client, bucket.storage, 10_000, memory);
  expect(temporal.fetched).not.toContain('prediction-late/run-late');
  memory.wideAt -= 60_000;
  await archiveClosedHistories(temporal.client, bucket.storage, 10_000, memory);
  // From a minute before the mark the first wide look began from (none: 0), not the mark now.
  expect(temporal.listedFrom.at(-1)!.getTime()).toBe(0 - 60_000);
  expect(temporal.fetched).toContain('prediction-late/run-late');
  expect((await archivedThrough(bucket.storage))!.getTime()).toBe(mark);
  // The next wide look begins a minute before the mark this one began from.
  memory.wideAt -= 60_000;
  await archiveClosedHistories(temporal.client, bucket.storage, 10_000, memory);
  expect(temporal.listedFrom.at(-1)!.getTime()).toBe(mark - 60_000);
});

test('a look cut short by its budget keeps what it copied and leaves the mark, so the next carries on', async () => {
  const bucket = fakeBucket();
  const temporal = fakeTemporal([run(1, 30), run(2, 20), run(3, 10)]);
  const memory = new ArchiveMemory();
  // A negative budget: spent before the first run.
  expect(await archiveClosedHistories(temporal.client, bucket.storage, -1, memory)).toEqual({ archived: 0, complete: false });
  expect(await archivedThrough(bucket.storage)).toBeUndefined();
  expect(await archiveClosedHistories(temporal.client, bucket.storage, 10_000, memory)).toEqual({ archived: 3, complete: true });
  expect((await readBack(bucket.storage)).map((r) => r.run)).toEqual(['prediction-1/run-1', 'prediction-2/run-2', 'prediction-3/run-3']);
});

test('the archive reads single-run JSON objects from before bundles beside bundles, and a run copied twice comes twice', async () => {
  const bucket = fakeBucket();
  const old = run(1, 600);
  const events = [{ ...historyOf(old).events[0], eventTime: { seconds: Long.fromNumber(Math.floor(old.closeTime.getTime() / 1000)) } }];
  await bucket.storage.putBytes(`histories/${old.workflowId}/${old.runId}.json`, historyToJSON({ events }));
  const temporal = fakeTemporal([run(2, 10)]);
  await archiveClosedHistories(temporal.client, bucket.storage, 10_000, new ArchiveMemory());
  // Another process, without the first one's memory, copies run 2 again.
  await archiveClosedHistories(temporal.client, bucket.storage, 10_000, new ArchiveMemory());
  const back = await readBack(bucket.storage);
  expect(back.map((r) => r.run).sort()).toEqual(['prediction-1/run-1', 'prediction-2/run-2', 'prediction-2/run-2']);
  expect(back.find((r) => r.run === 'prediction-1/run-1')).toEqual({
    run: 'prediction-1/run-1',
    closedAt: Math.floor(old.closeTime.getTime() / 1000) * 1000,
    result: 'prediction-1/run-1',
  });
});
