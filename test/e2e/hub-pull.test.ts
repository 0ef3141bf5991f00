/**
 * `kiln models pull hf://…` as a user runs it, against a local hub that speaks Hugging Face's
 * download protocol (test/fake-hub.ts): the file comes through a redirect to another origin, a
 * download cut off part way resumes from its partial file with a ranged GET, a wrong sha256 and
 * a file over the size limit are refused, and the pulled models answer through the API.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { closeDb, type Db } from '../../db/client';
import { writeLlamaGguf } from '../../tools/gguf/gguf-writer';
import { FakeHub, HUB_COMMIT } from '../fake-hub';
import { API_URL, api, newAccount, testDb } from '../helpers';
import { runCli } from '../processes';

jest.setTimeout(180_000);

const HF_TOKEN = 'hf_test_token';
/** Words the template alone adds to every chat: a chat that counts more prompt tokens than these was rendered with it (kiln/tiny-llama, the same vocabulary without a template, counts 32 for this test's message). */
const PREAMBLE_WORDS = 64;
const CHATML =
  'kiln '.repeat(PREAMBLE_WORDS) +
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

let db: Db;
let dir: string;
let cache: string;
let token: string;
let username: string;
const hub = new FakeHub();
let chat: Buffer;
let embed: Buffer;
/** The version the first pull made. */
let chatVersion: string;

beforeAll(async () => {
  db = testDb();
  ({
    token,
    account: { username },
  } = await newAccount(db, 'hub'));
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-hub-pull-'));
  cache = path.join(dir, 'cache');
  const spec = { embedding: 64, layers: 2, heads: 4, feedForward: 128, vocabWords: 200, seed: 11 };
  await writeLlamaGguf(path.join(dir, 'chat.gguf'), { ...spec, contextLength: 2048, chatTemplate: CHATML });
  await writeLlamaGguf(path.join(dir, 'embed.gguf'), { ...spec, contextLength: 512, pooling: 'mean' });
  chat = await readFile(path.join(dir, 'chat.gguf'));
  embed = await readFile(path.join(dir, 'embed.gguf'));
  hub.add('tiny-org/Tiny-Chat-GGUF/tiny-chat.F32.gguf', { bytes: chat });
  hub.add('tiny-org/Tiny-Embed-GGUF/embed.gguf', { bytes: embed });
  hub.add('tiny-org/Broken-GGUF/broken.gguf', { bytes: embed, sha256: createHash('sha256').update('other bytes').digest('hex') });
  hub.add('tiny-org/Huge-GGUF/huge.gguf', { bytes: embed, size: 100 * 2 ** 30 });
  await hub.start();
});
afterAll(async () => {
  await hub.stop();
  await rm(dir, { recursive: true, force: true });
  await closeDb(db);
});

/** Runs `kiln …` with the local hub, a download cache of the test's own and no config file. */
const kiln = (args: string[]) =>
  runCli('cli/kiln.ts', args, {
    ...process.env,
    XDG_CONFIG_HOME: path.join(dir, 'config'),
    KILN_CACHE: cache,
    KILN_API_URL: API_URL,
    KILN_API_TOKEN: token,
    KILN_HUB_URL: hub.url,
    HF_TOKEN,
  });

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

test('a download cut off part way resumes with a ranged GET; the version chats with the GGUF’s own template', async () => {
  const half = Math.floor(chat.length / 2);
  hub.cutNextAfter = half;
  const cut = await kiln(['models', 'pull', 'hf://tiny-org/Tiny-Chat-GGUF/tiny-chat.F32.gguf']).then(
    () => undefined,
    (err: { code: number; stderr: string }) => err,
  );
  expect(cut?.code).toBe(1);
  // The client keeps what reached it before the socket closed: at most what the server sent.
  const stopped = Number(new RegExp(`the download stopped at (\\d+) of ${chat.length} bytes`).exec(cut?.stderr ?? '')?.[1]);
  expect(stopped).toBeGreaterThan(0);
  expect(stopped).toBeLessThanOrEqual(half);
  expect(cut?.stderr).toContain('run the same pull again to resume');
  const partial = path.join(cache, 'hub', `${sha256(chat)}.partial`);
  expect((await stat(partial)).size).toBe(stopped);

  const cdnBefore = hub.cdnRequests.length;
  const { stdout, stderr } = await kiln(['--json', 'models', 'pull', 'hf://tiny-org/Tiny-Chat-GGUF/tiny-chat.F32.gguf']);
  expect(hub.cdnRequests.slice(cdnBefore)).toEqual([
    { method: 'GET', path: `/repos/${sha256(chat)}?signature=test`, range: `bytes=${stopped}-`, authorization: undefined },
  ]);
  // The token goes to the hub, never to the CDN its redirect names.
  expect(hub.hubRequests.every((r) => r.authorization === `Bearer ${HF_TOKEN}`)).toBe(true);
  expect(hub.cdnRequests.every((r) => r.authorization === undefined)).toBe(true);
  expect(stderr).toBe('');
  const pulled = JSON.parse(stdout);
  chatVersion = pulled.version;
  expect(pulled).toMatchObject({
    model: `${username}/tiny-chat`,
    source: `hf://tiny-org/Tiny-Chat-GGUF@${HUB_COMMIT}/tiny-chat.F32.gguf`,
    sha256: sha256(chat),
    size: chat.length,
    plan: { task: 'text-generation', architecture: 'llama', contextSize: 2048, trainedContext: 2048, chatTemplate: true },
  });
  await expect(stat(partial)).rejects.toThrow(/ENOENT/);
  expect((await readFile(path.join(cache, 'hub', 'sha256', sha256(chat)))).equals(chat)).toBe(true);

  const model = await api(`/v1/models/${pulled.model}`, { token });
  expect(model.body).toMatchObject({ task: 'text-generation', description: `Pulled from ${pulled.source}` });
  const version = await api(`/v1/models/${pulled.model}/versions/${pulled.version}`, { token });
  expect(version.body).toMatchObject({
    engine: 'llama.cpp',
    settings: { contextSize: 2048 },
    files: [{ path: 'tiny-chat.F32.gguf', sha256: sha256(chat), size: chat.length }],
  });
  const p = await api(`/v1/models/${pulled.model}/predictions`, {
    token,
    headers: { prefer: 'wait=60' },
    body: { input: { messages: [{ role: 'user', content: 'Name a river.' }], max_tokens: 6, min_tokens: 6, seed: 1 } },
  });
  expect(p.body).toMatchObject({ status: 'succeeded', metrics: { output_token_count: 6 } });
  expect(p.body.metrics.input_token_count).toBeGreaterThan(PREAMBLE_WORDS);
  expect(p.body.output.join('').trim().length).toBeGreaterThan(0);
});

test('an embedding GGUF (it pools its token states) becomes an embeddings version that embeds; progress goes to stderr', async () => {
  const { stdout, stderr } = await kiln(['models', 'pull', 'hf://tiny-org/Tiny-Embed-GGUF/embed.gguf', '--name', `${username}/pooled`]);
  expect(stdout).toContain(`pulled hf://tiny-org/Tiny-Embed-GGUF@${HUB_COMMIT}/embed.gguf as ${username}/pooled:`);
  expect(stdout).toContain('embeddings (it pools its token states (mean)), llama, context 512 (trained 512)');
  // Not a terminal: the progress bar writes lines, the last one whole.
  expect(stderr).toMatch(/download .* 100% \| 0\.\d\/0\.\d MB/);
  const p = await api(`/v1/models/${username}/pooled/predictions`, {
    token,
    headers: { prefer: 'wait=60' },
    body: { input: { text: ['a kiln fires clay', 'the river runs'] } },
  });
  expect(p.body.status).toBe('succeeded');
  expect(p.body.output).toHaveLength(2);
  for (const vector of p.body.output as number[][]) {
    expect(vector).toHaveLength(64);
    expect(Math.hypot(...vector)).toBeCloseTo(1, 3);
  }
});

test('a second pull of the file takes it from the cache and gives the same version (versions are named by their content); a model of another task is refused', async () => {
  const cdnBefore = hub.cdnRequests.length;
  const { stdout } = await kiln(['--json', 'models', 'pull', 'hf://tiny-org/Tiny-Chat-GGUF/tiny-chat.F32.gguf']);
  expect(hub.cdnRequests.length).toBe(cdnBefore);
  const again = JSON.parse(stdout);
  expect(again.model).toBe(`${username}/tiny-chat`);
  expect(again.version).toBe(chatVersion);
  const versions = await api(`/v1/models/${username}/tiny-chat/versions`, { token });
  expect(versions.body.results.map((v: { id: string }) => v.id)).toEqual([chatVersion]);
  await expect(
    kiln(['models', 'pull', 'hf://tiny-org/Tiny-Embed-GGUF/embed.gguf', '--name', `${username}/tiny-chat`]),
  ).rejects.toMatchObject({
    code: 1,
    stderr: expect.stringContaining(`${username}/tiny-chat is a text-generation model, and this GGUF is for embeddings`),
  });
});

test('bytes that do not hash to the hub’s sha256 are refused and removed; no model is made', async () => {
  const advertised = sha256(Buffer.from('other bytes'));
  await expect(kiln(['models', 'pull', 'hf://tiny-org/Broken-GGUF/broken.gguf'])).rejects.toMatchObject({
    code: 1,
    stderr: expect.stringContaining(`have sha256 ${sha256(embed)}, not the hub's ${advertised}: removed them`),
  });
  expect(await readdir(path.join(cache, 'hub'))).not.toContain(`${advertised}.partial`);
  await expect(stat(path.join(cache, 'hub', 'sha256', advertised))).rejects.toThrow(/ENOENT/);
  expect((await api(`/v1/models/${username}/broken`, { token })).status).toBe(404);
});

test('a file over the size limit is refused before a byte of it is downloaded', async () => {
  const cdnBefore = hub.cdnRequests.length;
  await expect(kiln(['models', 'pull', 'hf://tiny-org/Huge-GGUF/huge.gguf'])).rejects.toMatchObject({
    code: 1,
    stderr: expect.stringContaining('huge.gguf is 102400.0 MiB, over the pull limit of 65536 MiB'),
  });
  expect(hub.cdnRequests.length).toBe(cdnBefore);
  await expect(kiln(['models', 'pull', 'hf://tiny-org/Tiny-Embed-GGUF/embed.gguf', '--max-size', '0'])).rejects.toMatchObject({
    stderr: expect.stringMatching(/--max-size/),
  });
  expect(hub.cdnRequests.length).toBe(cdnBefore);
  expect((await api(`/v1/models/${username}/huge`, { token })).status).toBe(404);
});

test('a file the hub does not have is a clear 404', async () => {
  await expect(kiln(['models', 'pull', 'hf://tiny-org/Tiny-Chat-GGUF@v9/missing.gguf'])).rejects.toMatchObject({
    stderr: expect.stringContaining('404, no such repository, revision or file on the hub'),
  });
});
