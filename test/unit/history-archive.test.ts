/**
 * The history archive asks the bucket about each closed run once per process: a look lists the
 * runs closed since a minute before the mark, and the looks of that minute would otherwise each
 * send a HEAD for every one of them.
 */
import type { Client } from '@temporalio/client';
import { ArchiveMemory, archiveClosedHistories, archivedHistoryKey } from '../../activities/history-archive';
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
  };
  return { objects, calls, storage: storage as unknown as Storage };
}

/** Temporal's visibility as the archive reads it: closed runs, and each one's history. */
function fakeTemporal(runs: Array<{ workflowId: string; runId: string; closeTime: Date }>) {
  const fetched: string[] = [];
  const client = {
    workflow: {
      async *list() {
        yield* runs;
      },
      getHandle(workflowId: string, runId: string) {
        return {
          async fetchHistory() {
            fetched.push(`${workflowId}/${runId}`);
            return { events: [] };
          },
        };
      },
    },
  };
  return { fetched, client: client as unknown as Client };
}

const run = (n: number, closedSecondsAgo: number) => ({ workflowId: `prediction-${n}`, runId: `run-${n}`, closeTime: new Date(Date.now() - closedSecondsAgo * 1000) });

test('each closed run is copied once, and a later look asks the bucket nothing about it again', async () => {
  const bucket = fakeBucket();
  const temporal = fakeTemporal([run(1, 30), run(2, 20), run(3, 10)]);
  const memory = new ArchiveMemory();
  expect(await archiveClosedHistories(temporal.client, bucket.storage, 10_000, memory)).toEqual({ archived: 3, complete: true });
  expect(temporal.fetched).toEqual(['prediction-1/run-1', 'prediction-2/run-2', 'prediction-3/run-3']);
  for (let n = 1; n <= 3; n++) expect(bucket.objects.has(archivedHistoryKey(`prediction-${n}`, `run-${n}`))).toBe(true);
  const after = { ...bucket.calls };
  // The same runs listed again (they are within the overlap): no HEAD, no fetch, no put, not even of the unchanged mark.
  expect(await archiveClosedHistories(temporal.client, bucket.storage, 10_000, memory)).toEqual({ archived: 0, complete: true });
  expect(bucket.calls).toEqual(after);
  expect(temporal.fetched).toHaveLength(3);
});

test('a process that starts afresh asks the bucket about the runs of the overlap, and copies only the missing', async () => {
  const bucket = fakeBucket();
  const [one, two, three] = [run(1, 30), run(2, 20), run(3, 5)];
  const first = fakeTemporal([one, two]);
  await archiveClosedHistories(first.client, bucket.storage, 10_000, new ArchiveMemory());
  // Another process (no memory of the first): runs 1 and 2 are at or before the mark, run 3 is new.
  const second = fakeTemporal([one, two, three]);
  const sizesBefore = bucket.calls.size;
  expect(await archiveClosedHistories(second.client, bucket.storage, 10_000, new ArchiveMemory())).toEqual({ archived: 1, complete: true });
  expect(second.fetched).toEqual(['prediction-3/run-3']);
  // The mark (a HEAD and a read) and one HEAD each for runs 1 and 2; none for run 3, closed after the mark.
  expect(bucket.calls.size - sizesBefore).toBe(3);
});
