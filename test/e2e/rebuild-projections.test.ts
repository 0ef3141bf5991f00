/** Projections are rebuildable from Temporal: drop the table, rebuild it, get the same rows. */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { asc, eq } from 'drizzle-orm';
import { closeDb, type Db } from '../../db/client';
import { predictions } from '../../db/schema';
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
  const long = (await api('/v1/models/kiln/tiny-llama/predictions', { token, body: { input: { prompt: 'stop', max_tokens: 8192, min_tokens: 8192 } } })).body.id;
  ids.push(long);
  await poll(() => api(`/v1/predictions/${long}`, { token }), (r) => r.body.status === 'processing');
  await api(`/v1/predictions/${long}/cancel`, { token, method: 'POST' });
  for (const id of ids) await poll(() => api(`/v1/predictions/${id}`, { token }), (r) => TERMINAL.includes(r.body.status), { timeoutMs: 60_000 });

  const rows = () => db.select().from(predictions).where(eq(predictions.accountId, account.id)).orderBy(asc(predictions.id));
  const before = await rows();
  expect(before.map((r) => r.status).sort()).toEqual(['canceled', 'failed', 'succeeded', 'succeeded', 'succeeded']);

  const { stdout } = await run('node', ['--import', 'tsx', 'cli/admin.ts', 'rebuild-projections'], {
    cwd: path.resolve(__dirname, '../..'),
    env: process.env,
  });
  expect(stdout).toMatch(/rebuilt \d+ predictions from Temporal/);
  const after = await rows();
  expect(after).toEqual(before);
});
