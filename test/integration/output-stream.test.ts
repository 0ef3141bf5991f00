/**
 * The engine's output stream against the real database: every chunk once, in order, when a
 * commit goes through but its answer is lost (what a Postgres restart does to a write in flight),
 * and a `reset` ahead of a new attempt's output.
 */
import { asc, eq } from 'drizzle-orm';
import { OutputStream } from '../../activities/output-stream';
import { closeDb, type Db } from '../../db/client';
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
    .select({ event: predictionEvents.event, data: predictionEvents.data })
    .from(predictionEvents)
    .where(eq(predictionEvents.predictionId, predictionId))
    .orderBy(asc(predictionEvents.id));
}

/**
 * The database as an engine sees it when Postgres dies at the wrong moment: the transactions
 * chosen by `lose` commit, then their caller gets an error instead of the answer.
 */
function losingAnswers(lose: (n: number) => boolean): Db {
  let n = 0;
  return new Proxy(db, {
    get(target, prop, receiver) {
      if (prop !== 'transaction') return Reflect.get(target, prop, receiver);
      return async (...args: Parameters<Db['transaction']>) => {
        const result = await target.transaction(...args);
        n += 1;
        if (lose(n)) throw Object.assign(new Error('write CONNECTION_CLOSED 127.0.0.1:5432'), { code: 'CONNECTION_CLOSED' });
        return result;
      };
    },
  });
}

/** Each chunk a write of its own: the next is pushed once the last one is in the table. */
async function writeAll(stream: OutputStream, predictionId: string, chunks: string[]) {
  const before = (await streamOf(predictionId)).filter((e) => e.event === 'output').length;
  for (const [i, c] of chunks.entries()) {
    stream.push(c);
    await poll(() => streamOf(predictionId), (events) => events.filter((e) => e.event === 'output').length >= before + i + 1, { intervalMs: 5 });
  }
  await stream.close();
}

test('a write whose answer was lost is not written again: each chunk once, in order', async () => {
  const id = `test-${newId()}`;
  const errors: Error[] = [];
  // Every other write commits unanswered, the first one among them.
  const stream = new OutputStream(losingAnswers((n) => n % 2 === 1), id, (err) => errors.push(err));
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
  await writeAll(new OutputStream(losingAnswers((n) => n === 1), id, (err) => errors.push(err)), id, ['second', ' try']);
  expect(errors).toEqual([]);
  const events = await streamOf(id);
  expect(events.map((e) => [e.event, e.data])).toEqual([
    ['output', 'first'],
    ['output', ' try'],
    ['reset', '{}'],
    ['output', 'second'],
    ['output', ' try'],
  ]);
});
