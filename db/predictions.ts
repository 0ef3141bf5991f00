import { and, desc, eq, getTableColumns, inArray, sql } from 'drizzle-orm';
import type { PredictionSnapshot } from '../domain/prediction-snapshot';
import { isTerminalStatus, type PredictionStatus, type StreamEvent } from '../domain/statuses';
import { release } from './admissions';
import { builtOnce, type Db } from './client';
import { appendEvents, hasEvent, type Tx } from './events';
import { afterCursor, type PageCursor, pageOf } from './paging';
import { withoutNul } from './sanitize';
import { predictionEvents, predictions } from './schema';
import { recordUsage, type UsageRecord } from './usage';

export type PredictionRow = typeof predictions.$inferSelect;

/** Who writes a projection row: a workflow run, and whether it is still its workflow's current run. */
export interface RunWriter {
  runId: string;
  /** Asked only when another run wrote the row last (activities/run-writer.ts asks Temporal). */
  isCurrent: () => Promise<boolean>;
}

const toDate = (s: string | null | undefined) => (s ? new Date(s) : null);

/**
 * The workflow's view of a prediction as a row of the projection (webhooks render the same).
 * `retries` is the API's alone (a retry counts it up): no workflow write sets it.
 */
export function snapshotToRow(s: PredictionSnapshot): Omit<PredictionRow, 'retries'> {
  return {
    id: s.id,
    accountId: s.accountId,
    model: s.model,
    versionId: s.versionId,
    input: s.input,
    output: s.output ?? null,
    logs: s.logs,
    error: s.error,
    status: s.status,
    metrics: s.metrics,
    source: 'api',
    webhook: s.webhook ?? null,
    webhookEventsFilter: s.webhookEventsFilter ?? null,
    deadline: toDate(s.deadline),
    createdAt: new Date(s.createdAt),
    startedAt: toDate(s.startedAt),
    completedAt: toDate(s.completedAt),
    revision: s.revision,
    runId: null,
  };
}

/** The inverse of snapshotToRow: a projection row as the workflow's snapshot. */
export function rowToSnapshot(r: PredictionRow): PredictionSnapshot {
  return {
    id: r.id,
    accountId: r.accountId,
    model: r.model,
    versionId: r.versionId,
    input: r.input,
    output: r.output,
    logs: r.logs,
    error: r.error,
    status: r.status,
    metrics: r.metrics,
    createdAt: r.createdAt.toISOString(),
    startedAt: r.startedAt?.toISOString() ?? null,
    completedAt: r.completedAt?.toISOString() ?? null,
    webhook: r.webhook,
    webhookEventsFilter: r.webhookEventsFilter,
    deadline: r.deadline?.toISOString() ?? null,
    revision: r.revision,
  };
}

/** The columns a transition changes: what the engine may write (its role may update only these). */
function transitionOf(s: PredictionSnapshot) {
  const row = snapshotToRow(s);
  return {
    output: row.output,
    logs: row.logs,
    error: row.error,
    status: row.status,
    metrics: row.metrics,
    startedAt: row.startedAt,
    completedAt: row.completedAt,
    revision: row.revision,
  };
}

/** The row's write: the transition's columns of a row that is there, or the whole row, inserted or replacing. */
function writeRow(tx: Tx, s: PredictionSnapshot, runId: string | null, existing: boolean): Promise<unknown> {
  if (existing) {
    return tx
      .update(predictions)
      .set({ ...transitionOf(s), runId })
      .where(eq(predictions.id, s.id))
      .execute();
  }
  const { source: _source, ...row } = snapshotToRow(s);
  const values = { ...row, runId };
  const { id: _id, accountId: _a, createdAt: _c, ...changes } = values;
  return tx.insert(predictions).values(values).onConflictDoUpdate({ target: predictions.id, set: changes }).execute();
}

/**
 * What a transition adds to the prediction's stream: a reset where the stream starts again (ahead
 * of the rest: clients drop the old run's output), the new log lines, and at the end the output
 * (unless the stream has it) and done or error.
 */
export function transitionEvents(
  s: Pick<PredictionSnapshot, 'logs' | 'status' | 'output' | 'error'>,
  { oldLogs, restartStream, hasOutput }: { oldLogs: string; restartStream: boolean; hasOutput: boolean },
): Array<{ event: StreamEvent; data: string }> {
  const events: Array<{ event: StreamEvent; data: string }> = [];
  if (restartStream) events.push({ event: 'reset', data: '{}' });
  const newLogs = s.logs.startsWith(oldLogs) ? s.logs.slice(oldLogs.length) : s.logs;
  if (newLogs) events.push({ event: 'logs', data: newLogs.replace(/\n$/, '') });
  if (!isTerminalStatus(s.status)) return events;
  if (s.status === 'succeeded' && s.output != null && !hasOutput) events.push({ event: 'output', data: outputEventData(s.output) });
  if (s.status === 'failed') events.push({ event: 'error', data: s.error ?? 'prediction failed' });
  events.push({ event: 'done', data: s.status === 'succeeded' ? '{}' : JSON.stringify({ reason: s.status }) });
  return events;
}

/**
 * Writes a snapshot unless a later one is already there (activities may be retried and run
 * late: the revision keeps the newest transition; an equal one replaces it), and appends to the prediction's stream what
 * the transition adds: new log lines, and at the end the output (if the engine did not stream
 * it) and done or error. Both happen in one transaction, so a retry never duplicates an event.
 *
 * `existing`: the row is there already (the API writes it before the workflow starts), so only the
 * transition's columns are updated: what the engine, whose role may not insert rows, writes.
 * `also` runs in the same transaction when the snapshot was applied (the engine's last writes).
 * `replacesEnd`: the snapshot may overturn a finished row (the reconciler, following a history
 * that ended otherwise); the stream then starts again, as after a reset.
 */
export async function writePredictionSnapshot(
  db: Db,
  snapshot: PredictionSnapshot,
  writer?: RunWriter,
  opts: { existing?: boolean; also?: (tx: Tx) => Promise<unknown>; replacesEnd?: boolean } = {},
): Promise<boolean> {
  const s = withoutNul(snapshot);
  return db.transaction(async (tx) => {
    const [before] = await tx
      .select({
        logs: predictions.logs,
        // Only where it is used: the engine's role may not read the status.
        status: opts.replacesEnd ? predictions.status : sql<null>`null`,
        revision: predictions.revision,
        runId: predictions.runId,
        // Read with the row, not after it: one round trip fewer for the final write.
        hasOutput: sql<boolean>`exists (select 1 from ${predictionEvents} where ${predictionEvents.predictionId} = ${s.id} and ${predictionEvents.event} = 'output')`,
      })
      .from(predictions)
      .where(eq(predictions.id, s.id))
      .for('update');
    // Another run wrote the row: an operator reset the workflow. Its revisions count from the
    // reset point, so they do not say which write is newer; the workflow's current run does.
    const otherRun = Boolean(writer && before?.runId && before.runId !== writer.runId);
    if (otherRun) {
      if (!(await writer!.isCurrent())) return false;
    } else if (before && before.revision > s.revision) return false;
    const runId = writer?.runId ?? before?.runId ?? null;
    // The writes below touch different rows and tables: they go to the server together (one
    // round trip, not one each), the stream's events after their lock.
    if (opts.existing && !before) return false;
    const writes: Array<Promise<unknown>> = [writeRow(tx, s, runId, opts.existing === true)];
    if (opts.also) writes.push(opts.also(tx));
    // The same revision again: the workflow task that wrote it failed after its local activities
    // ran (a signal arrived as it completed, say) and ran once more, with its own clock. History
    // keeps the last run, so its values win; the stream already has this transition's events.
    if (!otherRun && before && before.revision === s.revision) {
      await Promise.all(writes);
      return true;
    }
    // An end the history overturned (a run terminated after its engine wrote `succeeded`) goes
    // as an old run's does: the row's outcome is the history's, and so is the stream's.
    const restartStream = otherRun || (opts.replacesEnd === true && before?.status != null && isTerminalStatus(before.status));
    if (restartStream) {
      // The new run starts the stream again: the old run's end goes (followers would stop there).
      writes.push(
        tx
          .delete(predictionEvents)
          .where(and(eq(predictionEvents.predictionId, s.id), inArray(predictionEvents.event, ['done', 'error'])))
          .execute(),
      );
    }
    const hasOutput = isTerminalStatus(s.status) && (restartStream || (before ? before.hasOutput : await hasEvent(tx, s.id, 'output')));
    const events = transitionEvents(s, { oldLogs: before?.logs ?? '', restartStream, hasOutput });
    writes.push(appendEvents(tx, s.id, events));
    await Promise.all(writes);
    return true;
  });
}

/** A succeeded prediction's `output` event: the text itself, or the JSON of any other output. */
const outputEventData = (output: unknown): string => (typeof output === 'string' ? output : JSON.stringify(output));

/**
 * The hot path's final write of a succeeded prediction in one round trip (migration 0013's
 * kiln_finish_prediction): what writePredictionSnapshot does with `existing`, plus the account's
 * admission slot released and usage recorded. A row that a reset's run wrote goes
 * writePredictionSnapshot's way, which asks Temporal which run is current.
 */
export async function finishSucceededPrediction(
  db: Db,
  snapshot: PredictionSnapshot,
  usage: UsageRecord,
  writer?: RunWriter,
): Promise<boolean> {
  const s = withoutNul(snapshot);
  const row = transitionOf(s);
  const [{ outcome }] = await db.execute<{ outcome: 'written' | 'stale' | 'missing' | 'other-run' }>(sql`
    select kiln_finish_prediction(${s.id}, ${writer?.runId ?? null}::text, ${JSON.stringify({
      output: row.output,
      logs: row.logs,
      error: row.error,
      status: row.status,
      metrics: row.metrics,
      started_at: row.startedAt,
      completed_at: row.completedAt,
      revision: row.revision,
    })}::jsonb, ${JSON.stringify({
      account_id: usage.accountId,
      model: usage.model,
      version_id: usage.versionId,
      task: usage.task,
      status: usage.status,
      hardware: usage.hardware,
      predict_seconds: usage.predictSeconds ?? 0,
      input_tokens: usage.inputTokens ?? 0,
      cached_tokens: usage.cachedTokens ?? 0,
      output_tokens: usage.outputTokens ?? 0,
      images: usage.images ?? 0,
    })}::jsonb, ${s.output == null ? null : outputEventData(s.output)}::text) as outcome`);
  if (outcome !== 'other-run') return outcome === 'written';
  return writePredictionSnapshot(db, snapshot, writer, {
    existing: true,
    also: (tx) => Promise.all([release(tx, s.id), recordUsage(tx, usage)]),
  });
}

const columns = getTableColumns(predictions);

// Every create makes this call: built once.
const createCall = builtOnce((db) =>
  db
    .select({ inserted: sql<boolean>`inserted`, admitted: sql<boolean>`admitted` })
    .from(sql`kiln_create_prediction(${sql.placeholder('row')}::jsonb, ${sql.placeholder('cap')}::integer)`)
    .prepare('create_prediction'),
);

/**
 * A prediction's first row (revision 0: any write from the workflow takes precedence) and, when
 * the account holds fewer than `cap` slots, its admission slot, in one round trip (migration
 * 0014's kiln_create_prediction). `row` is the row as written, or undefined when one was there
 * already (a create retried with the same Idempotency-Key, whose workflow admits it).
 */
export async function createAdmitted(
  db: Db,
  snapshot: PredictionSnapshot,
  cap: number,
): Promise<{ row: PredictionRow | undefined; admitted: boolean }> {
  const row: PredictionRow = { ...snapshotToRow(withoutNul(snapshot)), retries: 0 };
  const byColumn = Object.fromEntries(Object.entries(columns).map(([key, column]) => [column.name, row[key as keyof PredictionRow]]));
  const [result] = await createCall(db).execute({ row: JSON.stringify(byColumn), cap });
  return result.inserted ? { row, admitted: result.admitted } : { row: undefined, admitted: false };
}

/** Undoes a create whose workflow never started: its first row and its admission slot. */
export async function forgetUnstartedPrediction(db: Db, id: string): Promise<void> {
  await db.transaction(async (tx) => {
    await release(tx, id);
    await tx.delete(predictions).where(eq(predictions.id, id));
  });
}

// Every create (and every read of a prediction) reads its row: built once.
const ownPrediction = builtOnce((db) =>
  db.query.predictions
    .findFirst({ where: and(eq(predictions.id, sql.placeholder('id')), eq(predictions.accountId, sql.placeholder('account'))) })
    .prepare('get_prediction'),
);

export async function getPrediction(db: Db, accountId: string, id: string): Promise<PredictionRow | undefined> {
  return ownPrediction(db).execute({ id, account: accountId });
}

/** Newest first, in cursor pages (db/paging.ts). */
export async function listPredictions(
  db: Db,
  accountId: string,
  opts: { limit: number; cursor?: PageCursor },
): Promise<{ rows: PredictionRow[]; next?: PageCursor }> {
  const rows = await db
    .select()
    .from(predictions)
    .where(and(eq(predictions.accountId, accountId), afterCursor(predictions.createdAt, predictions.id, opts.cursor)))
    .orderBy(desc(predictions.createdAt), desc(predictions.id))
    .limit(opts.limit + 1);
  return pageOf(rows, opts.limit);
}

/** The statuses a prediction may be retried from (POST /v1/predictions/{id}/retry). */
export const retryableStatuses: readonly PredictionStatus[] = ['failed', 'canceled', 'aborted'];

/**
 * Puts a failed, canceled or aborted prediction back to `starting` for a retry's new run, inside
 * the caller's admitting transaction; undefined when it is not in one of those statuses (any
 * more). The row goes back to the state of a first row (revision 0, no run), as the API writes it
 * for a create: the old run has closed, and the new run's writes win by revision without being
 * taken for another run's (which would reset the stream a second time, after the new run's output).
 * The stream drops the old run's end and tells followers to drop its output.
 */
export async function reopenForRetry(
  tx: Tx,
  id: string,
  changes: { versionId: string; model: string; deadline: Date | null },
): Promise<PredictionRow | undefined> {
  const [before] = await tx.select().from(predictions).where(eq(predictions.id, id)).for('update');
  if (!before || !retryableStatuses.includes(before.status)) return undefined;
  const [row] = await tx
    .update(predictions)
    .set({
      ...changes,
      status: 'starting',
      output: null,
      logs: '',
      error: null,
      metrics: {},
      startedAt: null,
      completedAt: null,
      revision: 0,
      runId: null,
      retries: before.retries + 1,
    })
    .where(eq(predictions.id, id))
    .returning();
  await tx.delete(predictionEvents).where(and(eq(predictionEvents.predictionId, id), inArray(predictionEvents.event, ['done', 'error'])));
  await appendEvents(tx, id, [{ event: 'reset', data: '{}' }]);
  return row;
}

/** Undoes a retry whose run never started: the row as it was, and no slot. */
export async function restoreAfterFailedRetry(db: Db, before: PredictionRow): Promise<void> {
  await db.transaction(async (tx) => {
    await release(tx, before.id);
    const { id: _id, accountId: _a, createdAt: _c, ...columns } = before;
    await tx.update(predictions).set(columns).where(eq(predictions.id, before.id));
    // The stream ends as it did before the retry took its end away.
    const end = before.status === 'failed' ? [{ event: 'error' as const, data: before.error ?? 'prediction failed' }] : [];
    await appendEvents(tx, before.id, [...end, { event: 'done', data: JSON.stringify({ reason: before.status }) }]);
  });
}
