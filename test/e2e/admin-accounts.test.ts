/** `npm run admin -- accounts …` as an operator runs it: against the suite's database, through the CLI. */
import { findAccountByUsername } from '../../db/accounts';
import { closeDb, type Db } from '../../db/client';
import { newId } from '../../lib/ids';
import { api, testDb } from '../helpers';
import { runCli } from '../processes';

jest.setTimeout(120_000);

let db: Db;
beforeAll(() => {
  db = testDb();
});
afterAll(() => closeDb(db));

const admin = (...args: string[]) => runCli('cli/admin.ts', args);

test('accounts create with no options creates the account and prints a token that works', async () => {
  const username = `plain-${newId().slice(0, 10)}`;
  const { stdout } = await admin('accounts', 'create', username);
  const token = /^token (\S+)$/m.exec(stdout)?.[1];
  expect(token).toBeDefined();
  const me = await api('/v1/account', { token });
  expect(me.status).toBe(200);
  expect(me.body.username).toBe(username);
});

test('accounts update with no options leaves the account as it was', async () => {
  const username = `unchanged-${newId().slice(0, 10)}`;
  await admin('accounts', 'create', username, '--max-running', '3');
  const { stdout } = await admin('accounts', 'update', username);
  expect(JSON.parse(stdout)).toMatchObject({ username, maxRunning: 3 });
});

test('--rate-limit refuses what is not a task type, naming the task types, and creates nothing', async () => {
  const username = `limits-${newId().slice(0, 10)}`;
  const failed = await admin('accounts', 'create', username, '--rate-limit', 'tiny-llama=100000').then(
    () => undefined,
    (err: { code: number; stderr: string }) => err,
  );
  expect(failed?.code).not.toBe(0);
  expect(failed?.stderr).toContain('tiny-llama is not a task type');
  for (const task of ['text-generation', 'embeddings', 'remove-background']) expect(failed?.stderr).toContain(task);
  expect(await findAccountByUsername(db, username)).toBeUndefined();

  const { stdout } = await admin('accounts', 'create', username, '--rate-limit', 'embeddings=7');
  expect(stdout).toMatch(/^token \S+$/m);
  expect((await findAccountByUsername(db, username))?.rateLimits).toEqual({ embeddings: 7 });
});
