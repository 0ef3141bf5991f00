/**
 * Kiln's own archive of closed prediction and batch histories, for the dev server: `temporal
 * server start-dev` builds its configuration with Temporal's archival off and offers no way to
 * turn it on, so past the namespace's retention a closed history would be gone and its row
 * could no longer be rebuilt. The reconciler copies each closed run's history to the bucket,
 * `histories/<workflowId>/<runId>.json`, in the JSON that `temporal workflow show --output json`
 * writes (and `Worker.runReplayHistories` reads); `rebuild-projections` reads them back for
 * workflows Temporal no longer has. The full server archives with Temporal's own archival
 * instead (infra/temporal-server.sh); the copy here is harmless there.
 */
import type { Client } from '@temporalio/client';
import type { LoadedDataConverter } from '@temporalio/common';
import { decodeOptionalSinglePayload } from '@temporalio/common/lib/internal-non-workflow';
import { historyFromJSON, historyToJSON } from '@temporalio/common/lib/proto-utils';
import { LRUCache } from 'lru-cache';
import type { Storage } from '../lib/storage';

export const archivedHistoryKey = (workflowId: string, runId: string): string => `histories/${workflowId}/${runId}.json`;
export const ARCHIVE_PREFIX = 'histories/';
/** The close time every run before which is archived (an ISO instant). */
const WATERMARK_KEY = 'histories-archived-through';
/** Visibility is indexed a little after a run closes: each pass looks this far behind the mark. */
const OVERLAP_MS = 60_000;

async function readText(storage: Storage, key: string): Promise<string | undefined> {
  if ((await storage.size(key)) === undefined) return undefined;
  const chunks: Buffer[] = [];
  for await (const chunk of await storage.read(key)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * What one process has archived: each look lists the runs closed since a minute before the mark,
 * so without it every run would be asked for again (a HEAD each) by the dozen looks of that
 * minute. Another process may archive the same run; the copy is the same bytes either way.
 */
export class ArchiveMemory {
  readonly archived = new LRUCache<string, true>({ max: 100_000 });
  /** The mark as this process last wrote or read it. */
  mark: string | undefined;
}

/** The close time through which every run is archived, as the bucket's mark says (undefined: none yet). */
export async function archivedThrough(storage: Storage): Promise<Date | undefined> {
  const mark = await readText(storage, WATERMARK_KEY);
  return mark ? new Date(mark) : undefined;
}

/**
 * Copies the histories of prediction and batch runs closed since the mark that are not in the
 * bucket yet, for at most `budgetMs`. The mark moves only after a pass that saw everything, so a
 * pass cut short (a first one, with a long past to copy) is carried on by the next.
 */
export async function archiveClosedHistories(
  client: Client,
  storage: Storage,
  budgetMs: number,
  memory = new ArchiveMemory(),
): Promise<{ archived: number; complete: boolean }> {
  const started = Date.now();
  const mark = (memory.mark ??= await readText(storage, WATERMARK_KEY));
  const from = new Date((mark ? Date.parse(mark) : 0) - OVERLAP_MS);
  const query = `WorkflowType IN ('predictionWorkflow', 'batchWorkflow') AND ExecutionStatus != 'Running' AND CloseTime > '${from.toISOString()}'`;
  const markMs = mark ? Date.parse(mark) : 0;
  let newest = markMs;
  let archived = 0;
  for await (const wf of client.workflow.list({ query })) {
    if (Date.now() - started > budgetMs) return { archived, complete: false };
    const key = archivedHistoryKey(wf.workflowId, wf.runId);
    const closedAt = wf.closeTime?.getTime() ?? 0;
    // A run closed after the mark was in no complete pass: only the overlap's runs may be there.
    if (!memory.archived.has(key) && (closedAt > markMs || (await storage.size(key)) === undefined)) {
      const history = await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
      await storage.putBytes(key, historyToJSON(history));
      archived += 1;
    }
    memory.archived.set(key, true);
    newest = Math.max(newest, closedAt);
  }
  const newMark = newest > 0 ? new Date(newest).toISOString() : undefined;
  if (newMark && newMark !== mark) {
    await storage.putBytes(WATERMARK_KEY, newMark, 'text/plain');
    memory.mark = newMark;
  }
  return { archived, complete: true };
}

export interface ArchivedRun<S> {
  workflowId: string;
  runId: string;
  /** When the run closed (its last event). */
  closedAt: number;
  /** The run's result (its final state); undefined when it closed without one (terminated, timed out). */
  result: S | undefined;
}

/**
 * One archived history: how its run ended and with what result. The history is stored as Temporal
 * gave it, encoded: a result over the inline limit is a payload reference, which `converter` (the
 * client's, with Kiln's codec) resolves.
 */
export async function readArchivedRun<S>(storage: Storage, key: string, converter: LoadedDataConverter): Promise<ArchivedRun<S> | undefined> {
  const [, workflowId, file] = key.split('/');
  const text = await readText(storage, key);
  if (!text || !file?.endsWith('.json')) return undefined;
  const events = historyFromJSON(JSON.parse(text)).events ?? [];
  const last = events[events.length - 1];
  const payload = last?.workflowExecutionCompletedEventAttributes?.result?.payloads?.[0];
  return {
    workflowId,
    runId: file.slice(0, -'.json'.length),
    closedAt: Number(last?.eventTime?.seconds ?? 0) * 1000,
    result: (await decodeOptionalSinglePayload<S>(converter, payload)) ?? undefined,
  };
}
