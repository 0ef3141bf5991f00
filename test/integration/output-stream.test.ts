/**
 * The engine's output stream against the real database: every chunk once, in order, when a
 * commit goes through but its answer is lost (what a Postgres restart does to a write in flight);
 * a new attempt that continues the output so far, with the failed attempt fenced out; and a
 * `reset` ahead of a new attempt's output where it does not continue it.
 */
import { asc, eq } from 'drizzle-orm';
import { OutputStream } from '../../activities/output-stream';
import { closeDb, type Db } from '../../db/client';
import { beginAttempt, outputChunks, StaleAttemptError } from '../../db/events';
import { predictionEvents } from '../../db/schema';
import { newId } from '../../lib/ids';
import { poll, testDb } from '../helpers';

let db: Db;
beforeAll(() => {
  db = testDb();
});
afterAll(() => closeDb(db));

async function streamOf(predictionId: string) {
  return db
    .select({ event: predictionEvents.event, data: predictionEvents.data, attempt: predictionEvents.attempt })
    .from(predictionEvents)
    .where(eq(predictionEvents.predictionId, predictionId))
    .orderBy(asc(predictionEvents.id));
}

/**
 * The database as an engine sees it when Postgres dies at the wrong moment: the writes chosen by
 * `lose` (transactions, and the one-statement chunk appends) commit, then their caller gets an
 * error instead of the answer.
 */
function losingAnswers(lose: (n: number) => boolean): Db {
  let n = 0;
  return new Proxy(db, {
    get(target, prop, receiver) {
      if (prop !== 'transaction' && prop !== 'execute') return Reflect.get(target, prop, receiver);
      return async (...args: unknown[]) => {
        const result = await (Reflect.get(target, prop, receiver) as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        n += 1;
        if (lose(n)) throw Object.assign(new Error('write CONNECTION_CLOSED 127.0.0.1:5432'), { code: 'CONNECTION_CLOSED' });
        return result;
      };
    },
  });
}

/** Each chunk a write of its own: the next is pushed once the last one is in the table. */
async function writeAll(stream: OutputStream, predictionId: string, chunks: string[], tokens?: number[]) {
  const before = (await streamOf(predictionId)).filter((e) => e.event === 'output').length;
  for (const [i, c] of chunks.entries()) {
    stream.push(c, tokens?.[i]);
    await poll(
      () => streamOf(predictionId),
      (events) => events.filter((e) => e.event === 'output').length >= before + i + 1,
      { intervalMs: 5 },
    );
  }
  await stream.close();
}

test('a write whose answer was lost is not written again: each chunk once, in order', async () => {
  const id = `test-${newId()}`;
  const errors: Error[] = [];
  // Every other write commits unanswered, the first one among them.
  const stream = new OutputStream(
    losingAnswers((n) => n % 2 === 1),
    id,
    (err) => errors.push(err),
  );
  const chunks = ['a', ' b', ' b', ' b', ' c'];
  await writeAll(stream, id, chunks);
  expect(errors).toEqual([]);
  const events = await streamOf(id);
  expect(events.map((e) => e.event)).not.toContain('reset');
  expect(events.map((e) => e.data).join('')).toBe(chunks.join(''));
});

test("a new attempt's first output comes after a reset; the first attempt's had none", async () => {
  const id = `test-${newId()}`;
  const errors: Error[] = [];
  await writeAll(new OutputStream(db, id, (err) => errors.push(err)), id, ['first', ' try']);
  // The second attempt's first write commits unanswered: still one reset, one copy of its text.
  await writeAll(
    new OutputStream(
      losingAnswers((n) => n === 1),
      id,
      (err) => errors.push(err),
    ),
    id,
    ['second', ' try'],
  );
  expect(errors).toEqual([]);
  const events = await streamOf(id);
  expect(events.map((e) => [e.event, e.data])).toEqual([
    ['output', 'first'],
    ['output', ' try'],
    ['reset', '{"attempt":2}'],
    ['output', 'second'],
    ['output', ' try'],
  ]);
  expect(events.map((e) => e.attempt)).toEqual([1, 1, 2, 2, 2]);
  expect((await outputChunks(db, id)).join('')).toBe('second try');
});

test('a numbered attempt that does not continue the output voids it with a reset of its number', async () => {
  const id = `test-${newId()}`;
  const errors: Error[] = [];
  await writeAll(new OutputStream(db, id, (err) => errors.push(err), 1), id, ['first']);
  await writeAll(new OutputStream(db, id, (err) => errors.push(err), 2), id, ['second']);
  expect(errors).toEqual([]);
  expect((await streamOf(id)).map((e) => [e.event, e.data, e.attempt])).toEqual([
    ['output', 'first', 1],
    ['reset', '{"attempt":2}', 2],
    ['output', 'second', 2],
  ]);
});

test('a new attempt continues the output so far; the failed attempt cannot write after it began', async () => {
  const id = `test-${newId()}`;
  const errors: Error[] = [];
  const failed = new OutputStream(db, id, (err) => errors.push(err), 1);
  await writeAll(failed, id, ['Once', ' upon'], [1, 3]);
  // The workflow begins attempt 2: it gets the text so far and its length in tokens, and fences attempt 1 out.
  expect(await beginAttempt(db, id, 2)).toEqual({ text: 'Once upon', tokens: 3 });
  // A local activity retried after its commit answers the same.
  expect(await beginAttempt(db, id, 2)).toEqual({ text: 'Once upon', tokens: 3 });
  // Attempt 1 still runs somewhere (its heartbeats were lost, not its node): its write is refused.
  failed.push(' WRONG');
  await failed.close();
  expect(errors).toEqual([expect.any(StaleAttemptError)]);
  expect(failed.isReplaced).toBe(true);
  // Attempt 2's first write commits unanswered: still one copy, and no reset.
  await writeAll(
    new OutputStream(
      losingAnswers((n) => n === 1),
      id,
      (err) => errors.push(err),
      2,
    ),
    id,
    [' a', ' time'],
  );
  expect(errors).toHaveLength(1);
  const events = await streamOf(id);
  expect(events.map((e) => [e.event, e.attempt])).toEqual([
    ['output', 1],
    ['output', 1],
    ['attempt', 2],
    ['output', 2],
    ['output', 2],
  ]);
  expect((await outputChunks(db, id)).join('')).toBe('Once upon a time');
});

test('chunks that come while a write is in flight go out together in the next write, in order, and none is lost', async () => {
  const id = `test-${newId()}`;
  const errors: Error[] = [];
  // A database that holds the chunk appends after the first (one-statement writes) until told to go on: a busy host.
  let go!: () => void;
  const gate = new Promise<void>((resolve) => (go = resolve));
  let calls = 0;
  let held = 0;
  const slow = new Proxy(db, {
    get(target, prop, receiver) {
      if (prop !== 'execute') return Reflect.get(target, prop, receiver);
      return async (...args: unknown[]) => {
        calls += 1;
        if (calls > 1) {
          held += 1;
          await gate;
        }
        return (Reflect.get(target, prop, receiver) as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      };
    },
  });
  const stream = new OutputStream(slow, id, (err) => errors.push(err), 1);
  stream.push('a', 1);
  await poll(
    () => streamOf(id),
    (events) => events.length === 1,
    { intervalMs: 5 },
  );
  stream.push(' b', 2);
  await poll(
    async () => held,
    (n) => n === 1,
    { intervalMs: 5 },
  );
  const rest = Array.from({ length: 48 }, (_, i) => ` w${i + 3}`);
  for (const [i, c] of rest.entries()) stream.push(c, i + 3);
  go();
  await stream.close();
  expect(errors).toEqual([]);
  expect((await streamOf(id)).map((e) => [e.event, e.data])).toEqual([
    ['output', 'a'],
    ['output', ' b'],
    ['output', rest.join('')],
  ]);
  expect(held).toBe(2);
  expect(calls).toBe(3);
});

test("two streams' chunks due at once go to the database in one write, each in its own stream", async () => {
  const ids = [`test-${newId()}`, `test-${newId()}`];
  const errors: Error[] = [];
  let writes = 0;
  const counting = new Proxy(db, {
    get(target, prop, receiver) {
      if (prop !== 'execute') return Reflect.get(target, prop, receiver);
      return async (...args: unknown[]) => {
        writes += 1;
        return (Reflect.get(target, prop, receiver) as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      };
    },
  });
  const streams = ids.map((id) => new OutputStream(counting, id, (err) => errors.push(err), 1));
  // The first chunks go at once, one write each (time to first token).
  streams.forEach((s, i) => s.push(`first ${i}`, 1));
  await poll(
    async () => (await Promise.all(ids.map(streamOf))).map((e) => e.length),
    (lengths) => lengths.every((n) => n === 1),
    { intervalMs: 5 },
  );
  expect(writes).toBe(2);
  // The next ones wait for the shared clock's tick and leave together.
  streams.forEach((s, i) => s.push(` second ${i}`, 2));
  await poll(
    async () => (await Promise.all(ids.map(streamOf))).map((e) => e.length),
    (lengths) => lengths.every((n) => n === 2),
    { intervalMs: 5 },
  );
  expect(writes).toBe(3);
  await Promise.all(streams.map((s) => s.close()));
  expect(errors).toEqual([]);
  for (const [i, id] of ids.entries()) expect((await streamOf(id)).map((e) => e.data)).toEqual([`first ${i}`, ` second ${i}`]);
});
