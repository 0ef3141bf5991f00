/** Projections are rebuildable from Temporal: drop the table, rebuild it, get the same rows. */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { asc, eq, inArray } from 'drizzle-orm';
import { closeDb, type Db } from '../../db/client';
import { predictions } from '../../db/schema';
import { pacedLlama } from '../fixtures/models';
import { api, newAccount, poll, testDb, TERMINAL } from '../helpers';

jest.setTimeout(300_000);
const run = promisify(execFile);

let db: Db;
beforeAll(() => {
  db = testDb();
});
afterAll(() => closeDb(db));

test('npm run admin -- rebuild-projections rebuilds rows equal to the originals', async () => {
  const { token, account } = await newAccount(db, 'rebuild');
  const ids: string[] = [];
  const create = async (route: string, input: Record<string, unknown>) =>
    ids.push((await api(route, { token, body: { input } })).body.id);
  await create('/v1/models/kiln/tiny-llama/predictions', { prompt: 'one', max_tokens: 5, seed: 1 });
  await create('/v1/models/kiln/tiny-llama/predictions', { prompt: 'two', max_tokens: 9, seed: 2 });
  await create('/v1/models/kiln/echo-fixture/predictions', { text: 'three' });
  await create('/v1/models/kiln/remove-background/predictions', { image: `data:image/png;base64,${Buffer.from('nope').toString('base64')}` });
  // 2000 paced tokens last 40 s or more on any machine: the cancel lands mid-generation.
  await pacedLlama(db);
  const long = (await api('/v1/models/kiln-test/paced-llama/predictions', { token, body: { input: { prompt: 'stop', max_tokens: 2000, min_tokens: 2000 } } })).body.id;
  ids.push(long);
  await poll(() => api(`/v1/predictions/${long}`, { token }), (r) => r.body.status === 'processing');
  await api(`/v1/predictions/${long}/cancel`, { token, method: 'POST' });
  for (const id of ids) await poll(() => api(`/v1/predictions/${id}`, { token }), (r) => TERMINAL.includes(r.body.status), { timeoutMs: 60_000 });

  const rows = () => db.select().from(predictions).where(eq(predictions.accountId, account.id)).orderBy(asc(predictions.id));
  const before = await rows();
  expect(before.map((r) => r.status).sort()).toEqual(['canceled', 'failed', 'succeeded', 'succeeded', 'succeeded']);

  // Lose two rows and corrupt a third: only Temporal can say what they were.
  const [lost1, lost2, corrupted] = before.filter((r) => r.status === 'succeeded' || r.status === 'canceled').slice(0, 3);
  await db.delete(predictions).where(inArray(predictions.id, [lost1.id, lost2.id]));
  await db.update(predictions).set({ status: 'failed', output: null, error: 'corrupted by the test', logs: '' }).where(eq(predictions.id, corrupted.id));
  expect((await rows()).length).toBe(before.length - 2);

  const { stdout } = await run('node', ['--import', 'tsx', 'cli/admin.ts', 'rebuild-projections'], {
    cwd: path.resolve(__dirname, '../..'),
    env: process.env,
  });
  // Every prediction of the suite's namespace, this test's five among them.
  expect(Number(/rebuilt (\d+) predictions from Temporal/.exec(stdout)?.[1])).toBeGreaterThanOrEqual(before.length);
  const after = await rows();
  expect(after).toEqual(before);
});
