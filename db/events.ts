import { and, asc, desc, eq, gt, inArray, lt, lte, sql } from 'drizzle-orm';
import { type StreamEvent } from '../domain/statuses';
import { KilnError } from '../lib/kiln-error';
import { builtOnce, type Db } from './client';
import { withoutNul } from './sanitize';
import { predictionEvents } from './schema';

/** Also named in migration 0012's functions, which notify on it. */
export const EVENTS_CHANNEL = 'kiln_prediction_events';

/**
 * A notification's payload: the prediction's id, then ` output` where the new events are an
 * attempt's output (chunks, and the `reset` ahead of an attempt's first; the functions of migration
 * 0012 send those): a stream reads them, a wait for the prediction's end need not read its row for
 * each batch of tokens, since none of them ends it.
 */
export function parseNotice(payload: string): { predictionId: string; outputOnly: boolean } {
  const [predictionId, kind] = payload.split(' ');
  return { predictionId, outputOnly: kind === 'output' };
}

export type PredictionEventRow = typeof predictionEvents.$inferSelect;
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

/**
 * Appends events and notifies listeners at commit. Writers of one prediction take its advisory
 * lock, so event ids grow in commit order and a reader resuming after id N never skips one.
 * Returns the id of the last event written.
 */
export async function appendEvents(
  db: Db | Tx,
  predictionId: string,
  events: Array<{ event: StreamEvent; data: string; attempt?: number; tokens?: number }>,
): Promise<number | undefined> {
  if (events.length === 0) return undefined;
  const write = async (tx: Db | Tx) => {
    // The notification goes out at commit whenever it is asked for: it travels with the lock.
    await Promise.all([lockStream(tx, predictionId), tx.execute(sql`select pg_notify(${EVENTS_CHANNEL}, ${predictionId})`)]);
    const rows = await tx
      .insert(predictionEvents)
      .values(
        events.map((e) => ({
          predictionId,
          event: e.event,
          data: withoutNul(e.data),
          ...(e.attempt ? { attempt: e.attempt } : {}),
          ...(e.tokens !== undefined ? { tokens: e.tokens } : {}),
        })),
      )
      .returning({ id: predictionEvents.id });
    return Math.max(...rows.map((r) => r.id));
  };
  return 'rollback' in db ? write(db) : db.transaction(write);
}

const lockStream = (tx: Db | Tx, predictionId: string) => tx.execute(sql`select pg_advisory_xact_lock(hashtext(${predictionId}))`);

/** The events engine attempts write: their output, and what separates one attempt from the next (also listed in migration 0012's functions). */
const ATTEMPT_EVENTS = ['output', 'reset', 'attempt'] as const;

/** A write of an attempt that a later attempt has replaced (its node was given up for lost, yet it still runs). */
export class StaleAttemptError extends KilnError {
  constructor(predictionId: string, attempt: number, current: number) {
    super(`prediction ${predictionId}: attempt ${attempt} is over, attempt ${current} writes the stream now`);
  }
}

/** The newest engine-written event: its attempt is the stream's current one. Reads no `data`. */
async function lastAttemptEvent(tx: Db | Tx, predictionId: string) {
  const [row] = await tx
    .select({ id: predictionEvents.id, event: predictionEvents.event, attempt: predictionEvents.attempt })
    .from(predictionEvents)
    .where(and(eq(predictionEvents.predictionId, predictionId), inArray(predictionEvents.event, [...ATTEMPT_EVENTS])))
    .orderBy(desc(predictionEvents.id))
    .limit(1);
  return row;
}

/**
 * One output chunk of attempt `attempt`, in the stream only while no later attempt has begun:
 * a failed attempt that still runs (its heartbeats were lost, not its node) cannot add to the
 * text that the next attempt continues.
 *
 * One round trip (the function of migration 0012 takes the lock, checks the attempt and inserts):
 * a chunk goes out every few milliseconds while a model generates, and the five round trips of a
 * transaction (begin, lock, insert, notify, commit) held the engine's event loop, which also runs
 * the token loop, and Postgres's share of two cores, long enough to slow generation down.
 */
export async function appendOutput(db: Db, predictionId: string, data: string, attempt: number, tokens?: number): Promise<number> {
  const rows = await db.execute<{ id: string | null }>(
    sql`select kiln_append_output(${predictionId}, ${withoutNul(data)}, ${attempt}::integer, ${tokens ?? null}::integer) as id`,
  );
  const id = rows[0]?.id;
  if (id === null || id === undefined) {
    const last = await lastAttemptEvent(db, predictionId);
    throw new StaleAttemptError(predictionId, attempt, last?.attempt ?? attempt + 1);
  }
  return Number(id);
}

/**
 * Output chunks of several streams in one round trip and one commit, each as appendOutput writes
 * it (its stream's lock, the attempt fence, the insert, the notification): an id per chunk, in
 * order, or a StaleAttemptError where a later attempt writes that stream now.
 */
export async function appendOutputs(
  db: Db,
  chunks: { predictionId: string; data: string; attempt: number; tokens?: number }[],
): Promise<(number | StaleAttemptError)[]> {
  if (chunks.length === 1) {
    const [c] = chunks;
    return [await appendOutput(db, c.predictionId, c.data, c.attempt, c.tokens).catch(staleOrThrow)];
  }
  const json = JSON.stringify(chunks.map((c) => ({ p: c.predictionId, d: withoutNul(c.data), a: c.attempt, t: c.tokens ?? null })));
  const rows = await db.execute<{ n: string; id: string | null }>(
    sql`select u.n, kiln_append_output(u.p, u.d, u.a, u.t) as id
        from rows from (jsonb_to_recordset(${json}::jsonb) as (p text, d text, a integer, t integer)) with ordinality as u(p, d, a, t, n)`,
  );
  const ids = new Map(rows.map((r) => [Number(r.n) - 1, r.id]));
  return Promise.all(
    chunks.map(async (_, i) => {
      const id = ids.get(i);
      if (id !== null && id !== undefined) return Number(id);
      const { predictionId, attempt } = chunks[i];
      const last = await lastAttemptEvent(db, predictionId);
      return new StaleAttemptError(predictionId, attempt, last?.attempt ?? attempt + 1);
    }),
  );
}

function staleOrThrow(err: unknown): StaleAttemptError {
  if (err instanceof StaleAttemptError) return err;
  throw err;
}

/**
 * The first output chunk of an engine attempt. An attempt that continues the output already in
 * the stream was announced by an `attempt` event (beginAttempt): its text simply goes on. Output
 * of an earlier attempt with no such event (a workflow from before attempts continued) is
 * voided: a `reset` goes first, so a client drops that text and keeps one generation.
 * Without `attempt` (a workflow from before attempts were numbered), the attempt is the next one
 * after any output. Returns the id written and the attempt it was written as.
 */
export async function appendFirstOutput(
  db: Db,
  predictionId: string,
  data: string,
  attempt?: number,
  tokens?: number,
): Promise<{ id: number; attempt: number }> {
  // One round trip, like appendOutput: the first token's write is what time to first token waits for.
  const [row] = await db.execute<{ id: string | null; attempt: number; current: number }>(
    sql`select * from kiln_append_first_output(${predictionId}, ${withoutNul(data)}, ${attempt ?? null}::integer, ${tokens ?? null}::integer)`,
  );
  if (row.id === null) throw new StaleAttemptError(predictionId, row.attempt, row.current);
  return { id: Number(row.id), attempt: row.attempt };
}

/**
 * Whether an output write whose commit went unanswered (the connection died) landed: the
 * prediction's last output was written after `afterId` (the writer's previous event) by the
 * writer's attempt or, for a first write of unknown attempt, right after a reset or as the first
 * output.
 *
 * Only ids, attempts and event names are read: the engine, which writes the stream, may not read
 * what any stream holds (its database role has no SELECT on `data`). One attempt has one writer,
 * so an output of its attempt after its own last event is its own. Returns its id and attempt.
 */
export async function landedOutput(
  db: Db,
  predictionId: string,
  afterId: number | undefined,
  attempt: number | undefined,
): Promise<{ id: number; attempt: number } | undefined> {
  const [last, before] = await db
    .select({ id: predictionEvents.id, event: predictionEvents.event, attempt: predictionEvents.attempt })
    .from(predictionEvents)
    .where(and(eq(predictionEvents.predictionId, predictionId), inArray(predictionEvents.event, [...ATTEMPT_EVENTS])))
    .orderBy(desc(predictionEvents.id))
    .limit(2);
  if (last?.event !== 'output') return undefined;
  const ours =
    attempt !== undefined
      ? last.attempt === attempt && last.id > (afterId ?? 0)
      : afterId === undefined
        ? before?.event !== 'output'
        : last.id > afterId;
  return ours ? { id: last.id, attempt: last.attempt } : undefined;
}

/**
 * Attempt `attempt` begins after a failed one: the output in the stream so far (after the last
 * reset) is the start of its text, and from now on only it may add to the stream. Idempotent:
 * called again (a retried local activity) it answers the same. Returns the text and its length in
 * tokens as the engine counted them (undefined where the stream did not record it).
 */
export async function beginAttempt(db: Db, predictionId: string, attempt: number): Promise<{ text: string; tokens?: number }> {
  return db.transaction(async (tx) => {
    await lockStream(tx, predictionId);
    const [fence] = await tx
      .select({ id: predictionEvents.id })
      .from(predictionEvents)
      .where(
        and(eq(predictionEvents.predictionId, predictionId), eq(predictionEvents.event, 'attempt'), eq(predictionEvents.attempt, attempt)),
      )
      .limit(1);
    const chunks = await outputRows(tx, predictionId, fence?.id);
    const text = chunks.map((c) => c.data).join('');
    const tokens = chunks.length === 0 ? 0 : (chunks.at(-1)!.tokens ?? undefined);
    if (!fence)
      await appendEvents(tx, predictionId, [
        { event: 'attempt', data: JSON.stringify({ attempt, continues_chars: text.length }), attempt },
      ]);
    return { text, tokens };
  });
}

/**
 * The output so far of a streaming prediction: its output chunks after the last reset (before
 * event `beforeId`, if given), in order. What GET shows while it runs, with no projection write.
 */
export async function outputChunks(db: Db | Tx, predictionId: string, beforeId?: number): Promise<string[]> {
  return (await outputRows(db, predictionId, beforeId)).map((r) => r.data);
}

async function outputRows(db: Db | Tx, predictionId: string, beforeId?: number): Promise<Array<{ data: string; tokens: number | null }>> {
  const before = beforeId === undefined ? sql`true` : lt(predictionEvents.id, beforeId);
  const [reset] = await db
    .select({ id: predictionEvents.id })
    .from(predictionEvents)
    .where(and(eq(predictionEvents.predictionId, predictionId), eq(predictionEvents.event, 'reset'), before))
    .orderBy(desc(predictionEvents.id))
    .limit(1);
  return db
    .select({ data: predictionEvents.data, tokens: predictionEvents.tokens })
    .from(predictionEvents)
    .where(
      and(
        eq(predictionEvents.predictionId, predictionId),
        eq(predictionEvents.event, 'output'),
        gt(predictionEvents.id, reset?.id ?? 0),
        before,
      ),
    )
    .orderBy(asc(predictionEvents.id));
}

/** The id of the prediction's last `reset` after `afterId`, or 0: output before it is a failed attempt's. */
export async function lastResetAfter(db: Db, predictionId: string, afterId: number): Promise<number> {
  const [row] = await db
    .select({ id: predictionEvents.id })
    .from(predictionEvents)
    .where(and(eq(predictionEvents.predictionId, predictionId), eq(predictionEvents.event, 'reset'), gt(predictionEvents.id, afterId)))
    .orderBy(desc(predictionEvents.id))
    .limit(1);
  return row?.id ?? 0;
}

/**
 * Where a client that saw event `seq` of the prediction's stream goes on: the serial id of that
 * event, or of the last one before it where that one is gone (a new run drops the old run's
 * `done`); 0 where there is none.
 */
export async function eventIdAtSeq(db: Db, predictionId: string, seq: number): Promise<number> {
  const [row] = await db
    .select({ id: predictionEvents.id })
    .from(predictionEvents)
    .where(and(eq(predictionEvents.predictionId, predictionId), lte(predictionEvents.seq, seq)))
    .orderBy(desc(predictionEvents.seq))
    .limit(1);
  return row?.id ?? 0;
}

// A stream reads the events after its last once for each batch of tokens: built once.
const after = builtOnce((db) =>
  db
    .select()
    .from(predictionEvents)
    .where(and(eq(predictionEvents.predictionId, sql.placeholder('prediction')), gt(predictionEvents.id, sql.placeholder('after'))))
    .orderBy(asc(predictionEvents.id))
    .limit(sql.placeholder('limit'))
    .prepare('events_after'),
);

export async function eventsAfter(db: Db, predictionId: string, afterId: number, limit = 1000): Promise<PredictionEventRow[]> {
  return after(db).execute({ prediction: predictionId, after: afterId, limit });
}

export async function hasEvent(db: Db | Tx, predictionId: string, event: StreamEvent): Promise<boolean> {
  const rows = await db
    .select({ id: predictionEvents.id })
    .from(predictionEvents)
    .where(and(eq(predictionEvents.predictionId, predictionId), eq(predictionEvents.event, event)))
    .limit(1);
  return rows.length > 0;
}

/** How many engine attempts a prediction has begun, as its stream records them (1 when none was retried). */
export async function attemptsBegun(db: Db, predictionId: string): Promise<number> {
  const [row] = await db
    .select({ attempt: sql<number | null>`max(${predictionEvents.attempt})` })
    .from(predictionEvents)
    .where(and(eq(predictionEvents.predictionId, predictionId), inArray(predictionEvents.event, [...ATTEMPT_EVENTS])));
  return Math.max(1, Number(row?.attempt ?? 1));
}
