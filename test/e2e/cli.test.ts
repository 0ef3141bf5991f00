/** The kiln CLI as a user runs it: a real process against the real stack. */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { closeDb, type Db } from '../../db/client';
import { loadSharp } from '../../engines/onnx/engine';
import { API_URL, api, newAccount, poll, testDb } from '../helpers';
import { runCli } from '../processes';

jest.setTimeout(120_000);

let db: Db;
let home: string;
let token: string;
beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'cli')).token;
  home = await mkdtemp(path.join(os.tmpdir(), 'kiln-cli-'));
});
afterAll(async () => {
  await rm(home, { recursive: true, force: true });
  await closeDb(db);
});

/** Runs `kiln …` with its own config dir; no token in the environment unless given. */
const kiln = async (args: string[], env: Record<string, string> = {}) => {
  const base: Record<string, string | undefined> = { ...process.env, XDG_CONFIG_HOME: home };
  delete base.KILN_API_TOKEN;
  delete base.KILN_API_URL;
  Object.assign(base, env);
  return runCli('cli/kiln.ts', args, base);
};

test('login saves the token; later commands use it', async () => {
  const { stdout } = await kiln(['login', '--url', API_URL, '--token', token]);
  expect(stdout).toMatch(/logged in to .* as cli-/);
  const saved = JSON.parse(await readFile(path.join(home, 'kiln', 'credentials.json'), 'utf8'));
  expect(saved).toEqual({ url: API_URL, token });
  const models = JSON.parse((await kiln(['--json', 'models', 'list'])).stdout);
  expect(models.map((m: { owner: string; name: string }) => `${m.owner}/${m.name}`)).toContain('kiln/tiny-llama');
});

test('run streams the output, and the prediction is then listed and shown', async () => {
  const { stdout, stderr } = await kiln([
    'run',
    'kiln/tiny-llama',
    '-i',
    'prompt=The kiln',
    '-i',
    'max_tokens=10',
    '-i',
    'min_tokens=10',
    '-i',
    'seed=3',
  ]);
  const id = /^([a-z2-7]{26}) /.exec(stderr)![1];
  expect(stdout.trim().length).toBeGreaterThan(0);
  expect(stderr).toMatch(/Generated 10 tokens/);
  const shown = JSON.parse((await kiln(['--json', 'predictions', 'get', id])).stdout);
  expect(shown.status).toBe('succeeded');
  expect(stdout.trim()).toBe(shown.output.join('').trim());
  expect(shown.input).toEqual({ prompt: 'The kiln', max_tokens: 10, min_tokens: 10, seed: 3 });
  const list = JSON.parse((await kiln(['--json', 'predictions', 'list'])).stdout);
  expect(list[0].id).toBe(id);
});

test('a file input is uploaded with @path', async () => {
  const sharp = await loadSharp();
  const png = path.join(home, 'dot.png');
  await writeFile(
    png,
    await sharp({ create: { width: 64, height: 48, channels: 3, background: '#3050e0' } })
      .png()
      .toBuffer(),
  );
  const { stdout } = await kiln(['--json', 'run', 'kiln/remove-background', '-i', `image=@${png}`, '--no-stream']);
  const p = JSON.parse(stdout);
  expect(p.status).toBe('succeeded');
  expect(p.input.image).toMatch(/\/v1\/files\/[a-z2-7]{26}\/content\?/);
  expect(p.output).toMatch(/\/v1\/files\/[a-z2-7]{26}\/content\?/);
});

test('tokens and the webhook secret', async () => {
  const created = JSON.parse((await kiln(['--json', 'tokens', 'create', '--name', 'from-cli'])).stdout);
  expect(created.token).toMatch(/^kiln_/);
  const list = JSON.parse((await kiln(['--json', 'tokens', 'list'])).stdout);
  expect(list.map((t: { name: string }) => t.name)).toContain('from-cli');
  expect(JSON.parse((await kiln(['--json', 'tokens', 'revoke', created.id])).stdout).revoked_at).not.toBeNull();
  expect((await kiln(['webhooks', 'secret'])).stdout.trim()).toMatch(/^whsec_/);
});

test('errors say what to do, with a non-zero exit', async () => {
  await expect(kiln(['run', 'kiln/tiny-llama', '-i', 'nonsense'])).rejects.toMatchObject({
    code: 1,
    stderr: expect.stringContaining('expected key=value'),
  });
  await expect(kiln(['run', 'kiln/tiny-llama', '-i', 'max_tokens=3'])).rejects.toMatchObject({
    stderr: expect.stringContaining('input.prompt'),
  });
  await expect(kiln(['models', 'list'], { KILN_API_TOKEN: 'kiln_wrong' })).rejects.toMatchObject({
    stderr: expect.stringContaining('kiln login'),
  });
});

test('inspect shows the prediction next to its workflow in Temporal, with the Temporal UI link', async () => {
  const env = { KILN_API_URL: API_URL, KILN_API_TOKEN: token };
  const { stderr } = await kiln(['run', 'kiln/tiny-llama', '-i', 'prompt=inspect me', '-i', 'max_tokens=3'], env);
  const id = /^([a-z2-7]{26}) /.exec(stderr)![1];
  const shown = JSON.parse((await kiln(['--json', 'inspect', id], env)).stdout);
  expect(shown.prediction).toMatchObject({ id, status: 'succeeded', workflow_id: `prediction-${id}` });
  expect(shown.workflow).toMatchObject({
    workflow_id: `prediction-${id}`,
    status: 'COMPLETED',
    search_attributes: { KilnStatus: 'succeeded', KilnModel: 'kiln/tiny-llama', KilnAccount: expect.stringMatching(/^cli-/) },
  });
  expect(shown.workflow.run_id).toMatch(/^[0-9a-f-]{36}$/);
  expect(shown.workflow.history_length).toBeGreaterThan(3);
  // The suite's API links its namespace in the dev server's UI (infra/env.sh sets KILN_TEMPORAL_UI_URL).
  const link = `${process.env.KILN_TEMPORAL_UI_URL}/namespaces/${process.env.TEMPORAL_NAMESPACE}/workflows/prediction-${id}`;
  expect(shown.temporal_ui).toBe(link);
  expect(shown.prediction.urls.temporal_ui).toBe(link);

  const { stdout } = await kiln(['inspect', id], env);
  expect(stdout).toContain(`run          ${shown.workflow.run_id}`);
  expect(stdout).toContain(`temporal ui  ${link}`);

  // Without Temporal in reach (a tenant's machine), the API's side is still shown.
  const away = await kiln(['inspect', id], { ...env, TEMPORAL_ADDRESS: '127.0.0.1:1' });
  expect(away.stdout).toMatch(/temporal +Temporal at 127\.0\.0\.1:1 is not reachable/);
  expect(away.stdout).toContain(`workflow     prediction-${id}`);
});

test('retry runs a failed prediction again under its id; a succeeded one is refused, saying why', async () => {
  const env = { KILN_API_URL: API_URL, KILN_API_TOKEN: token };
  // The echo fixture refuses this input on every attempt: the retry runs, and fails again.
  const failed = await api('/v1/models/kiln/echo-fixture/predictions', {
    token,
    body: { input: { error: 'refused for the test' } },
    headers: { prefer: 'wait=30' },
  });
  expect(failed.body.status).toBe('failed');
  await poll(
    () => api(`/v1/account`, { token }),
    (r) => r.body.current.admitted === 0,
  );
  const { stdout } = await kiln(['retry', failed.body.id], env);
  expect(stdout.trim()).toMatch(new RegExp(`^${failed.body.id} starting \\(run [0-9a-f-]{36}\\)$`));
  await poll(
    () => api(`/v1/predictions/${failed.body.id}`, { token }),
    (r) => r.body.status === 'failed',
    { timeoutMs: 30_000 },
  );
  // --wait prints the prediction as the new run left it, and exits non-zero: it failed again.
  await expect(kiln(['--json', 'retry', failed.body.id, '--wait'], env)).rejects.toMatchObject({
    code: 1,
    stdout: expect.stringMatching(/"status": "failed"[\s\S]*"run_id"/),
  });

  const ok = await api('/v1/models/kiln/echo-fixture/predictions', {
    token,
    body: { input: { text: 'fine' } },
    headers: { prefer: 'wait=30' },
  });
  expect(ok.body.status).toBe('succeeded');
  await expect(kiln(['retry', ok.body.id], env)).rejects.toMatchObject({
    code: 1,
    stderr: expect.stringContaining('is succeeded; only a failed, canceled, aborted prediction can be retried'),
  });
});
