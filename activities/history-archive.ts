/**
 * Kiln's own archive of closed prediction and batch histories, for the dev server: `temporal
 * server start-dev` builds its configuration with Temporal's archival off and offers no way to
 * turn it on, so past the namespace's retention a closed history would be gone and its row
 * could no longer be rebuilt. Each reconciler look copies the histories of the runs closed since
 * its mark into one bundle, `histories/bundles/<time>-<id>.ndjson.gz`: gzip'd lines of
 * `{ workflowId, runId, closedAt, history }`, the history as Temporal's own `History` protobuf
 * (base64), which `Worker.runReplayHistory` takes as it is and `npm run admin -- archived-history`
 * prints as `temporal workflow show --output json` would. `rebuild-projections` reads them back
 * for workflows Temporal no longer has. The full server archives with Temporal's own archival
 * instead (infra/temporal-server.sh); the copy here is harmless there.
 *
 * Why this shape: the copy is a cost every prediction pays. One object a look instead of one a
 * run, the history as Temporal sent it instead of JSON, and a visibility list that names each run
 * about four times instead of thirteen took it from about 12 ms of CPU a prediction to about 5
 * (README, Benchmarks).
 */
import { randomUUID } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import type { Client } from '@temporalio/client';
import type { LoadedDataConverter } from '@temporalio/common';
import { decodeOptionalSinglePayload } from '@temporalio/common/lib/internal-non-workflow';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { temporal } from '@temporalio/proto';
import { LRUCache } from 'lru-cache';
import type { Storage } from '../lib/storage';

type History = temporal.api.history.v1.IHistory;

export const ARCHIVE_PREFIX = 'histories/';
const BUNDLE_PREFIX = `${ARCHIVE_PREFIX}bundles/`;
/** The close time every run before which is archived (an ISO instant). */
const WATERMARK_KEY = 'histories-archived-through';
/**
 * Visibility indexes a run a little after it closes, so a look lists from a little before the
 * mark: most looks SHORT_OVERLAP_MS before it, and one a minute WIDE_OVERLAP_MS before the mark
 * that the previous such look began from, so that a run indexed up to a minute late is listed by
 * one of them whenever it turns up. Every look listing a whole minute named each run a dozen times.
 */
const SHORT_OVERLAP_MS = 5_000;
const WIDE_OVERLAP_MS = 60_000;
/** Runs per bundle at most: a long backlog (a first look) goes into several. */
const BUNDLE_RUNS = 2_000;

/** One closed run in the archive. */
export interface ArchivedHistory {
  workflowId: string;
  runId: string;
  /** When the run closed, ms since the epoch. */
  closedAt: number;
  history: History;
}

interface BundleLine {
  workflowId: string;
  runId: string;
  closedAt: string;
  /** The `temporal.api.history.v1.History` protobuf, base64. */
  history: string;
}

async function readBytes(storage: Storage, key: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of await storage.read(key)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * What one process has archived: the looks of a minute list the same runs again, and each is
 * fetched once. Another process (the reconciler's activity moved, a restart) may copy a run of
 * the overlap again into its own bundle: the same history twice, which readers take once.
 */
export class ArchiveMemory {
  readonly archived = new LRUCache<string, true>({ max: 100_000 });
  /** The mark as this process last wrote or read it. */
  mark: string | undefined;
  /** When this process last listed the wide overlap (0: never), and the mark that look began from. */
  wideAt = 0;
  wideMark: number | undefined;
}

/** The close time through which every run is archived, as the bucket's mark says (undefined: none yet). */
export async function archivedThrough(storage: Storage): Promise<Date | undefined> {
  if ((await storage.size(WATERMARK_KEY)) === undefined) return undefined;
  const mark = (await readBytes(storage, WATERMARK_KEY)).toString('utf8');
  return mark ? new Date(mark) : undefined;
}

/** The runs closed after `from` (workflow id, run id, close time), read from visibility as they come. */
export async function* closedRuns(client: Client, from: Date): AsyncGenerator<{ workflowId: string; runId: string; closedAt: number }> {
  const query = `WorkflowType IN ('predictionWorkflow', 'batchWorkflow') AND ExecutionStatus != 'Running' AND CloseTime > '${from.toISOString()}'`;
  for await (const run of client.workflow.list({ query }))
    yield { workflowId: run.workflowId, runId: run.runId, closedAt: run.closeTime?.getTime() ?? 0 };
}

/** Writes runs as one bundle (nothing when there are none). */
async function putBundle(storage: Storage, runs: ArchivedHistory[]): Promise<void> {
  if (runs.length === 0) return;
  const lines = runs.map((r) => {
    const line: BundleLine = {
      workflowId: r.workflowId,
      runId: r.runId,
      closedAt: new Date(r.closedAt).toISOString(),
      history: Buffer.from(temporal.api.history.v1.History.encode(r.history).finish()).toString('base64'),
    };
    return JSON.stringify(line);
  });
  // Level 1: histories repeat themselves, so even the cheapest level keeps a sixth of the bytes.
  const body = gzipSync(`${lines.join('\n')}\n`, { level: 1 });
  await storage.putBytes(`${BUNDLE_PREFIX}${new Date().toISOString()}-${randomUUID().slice(0, 8)}.ndjson.gz`, body, 'application/gzip');
}

/**
 * Copies the histories of prediction and batch runs closed since the mark that this process has
 * not copied, for at most `budgetMs`. The mark moves only after a look that saw everything, so a
 * look cut short (a first one, with a long past to copy) is carried on by the next.
 */
export async function archiveClosedHistories(
  client: Client,
  storage: Storage,
  budgetMs: number,
  memory = new ArchiveMemory(),
): Promise<{ archived: number; complete: boolean }> {
  const started = Date.now();
  const mark = (memory.mark ??= (await archivedThrough(storage))?.toISOString());
  const markMs = mark ? Date.parse(mark) : 0;
  const wide = started - memory.wideAt >= WIDE_OVERLAP_MS;
  let newest = markMs;
  let archived = 0;
  let bundle: ArchivedHistory[] = [];
  const flush = async () => {
    await putBundle(storage, bundle);
    for (const r of bundle) memory.archived.set(`${r.workflowId}/${r.runId}`, true);
    archived += bundle.length;
    bundle = [];
  };
  // A run that was not listed yet at the last wide look closed less than a minute before that look's mark.
  const from = wide ? Math.min(markMs, memory.wideMark ?? markMs) - WIDE_OVERLAP_MS : markMs - SHORT_OVERLAP_MS;
  for await (const run of closedRuns(client, new Date(from))) {
    if (Date.now() - started > budgetMs) {
      await flush();
      return { archived, complete: false };
    }
    if (!memory.archived.has(`${run.workflowId}/${run.runId}`)) {
      bundle.push({ ...run, history: await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory() });
      if (bundle.length >= BUNDLE_RUNS) await flush();
    }
    newest = Math.max(newest, run.closedAt);
  }
  await flush();
  if (wide) {
    memory.wideAt = started;
    memory.wideMark = markMs;
  }
  const newMark = newest > 0 ? new Date(newest).toISOString() : undefined;
  if (newMark && newMark !== mark) {
    await storage.putBytes(WATERMARK_KEY, newMark, 'text/plain');
    memory.mark = newMark;
  }
  return { archived, complete: true };
}

/**
 * Every archived run, one object at a time: the bundles, and the single-run JSON objects
 * (`histories/<workflowId>/<runId>.json`) that Kiln wrote before bundles. A run copied twice
 * comes twice.
 */
export async function* archivedHistories(storage: Storage): AsyncGenerator<ArchivedHistory> {
  for await (const keys of storage.list(ARCHIVE_PREFIX)) {
    for (const key of keys) {
      if (key.startsWith(BUNDLE_PREFIX) && key.endsWith('.ndjson.gz')) {
        for (const text of gunzipSync(await readBytes(storage, key))
          .toString('utf8')
          .split('\n')) {
          if (!text) continue;
          const line = JSON.parse(text) as BundleLine;
          const history = temporal.api.history.v1.History.decode(Buffer.from(line.history, 'base64'));
          yield { workflowId: line.workflowId, runId: line.runId, closedAt: Date.parse(line.closedAt), history };
        }
      } else if (key.endsWith('.json')) {
        const [, workflowId, file] = key.split('/');
        const history = historyFromJSON(JSON.parse((await readBytes(storage, key)).toString('utf8')));
        const events = history.events ?? [];
        const closedAt = Number(events[events.length - 1]?.eventTime?.seconds ?? 0) * 1000;
        yield { workflowId, runId: file.slice(0, -'.json'.length), closedAt, history };
      }
    }
  }
}

/**
 * A run's result (its final state), from its history as Temporal gave it, encoded: a result over
 * the inline limit is a payload reference, which `converter` (the client's, with Kiln's codec)
 * resolves. Undefined when it closed without one (terminated, timed out).
 */
export async function resultOf<S>(run: ArchivedHistory, converter: LoadedDataConverter): Promise<S | undefined> {
  const events = run.history.events ?? [];
  const payload = events[events.length - 1]?.workflowExecutionCompletedEventAttributes?.result?.payloads?.[0];
  return (await decodeOptionalSinglePayload<S>(converter, payload)) ?? undefined;
}
