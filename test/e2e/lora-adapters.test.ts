/**
 * LoRA adapters through HTTP and the real CLI: a random adapter for kiln/tiny-llama is pushed with
 * `kiln push --lora-for`, then run by its own name, by a `lora` input on the base, and by OpenAI's
 * `owner/base:adapter`. Greedy output differs from the base's and repeats; the base's weights are
 * loaded once on the node, the adapter being a context on them.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { eq } from 'drizzle-orm';
import { closeDb, type Db } from '../../db/client';
import { liveNodes } from '../../db/nodes';
import { usageRecords } from '../../db/schema';
import { TINY_LLAMA } from '../../infra/seed';
import { writeLlamaGguf } from '../../tools/gguf/gguf-writer';
import { writeLoraGguf } from '../../tools/gguf/lora-writer';
import { API_URL, api, newAccount, poll, testDb } from '../helpers';
import { runCli } from '../processes';

jest.setTimeout(240_000);

let db: Db;
let dir: string;
let me: { token: string; username: string };
let adapterVersion: string;
let baseVersion: string;

const greedy = { prompt: 'The kiln was', max_tokens: 16, temperature: 0, seed: 1 };

async function predict(route: string, input: Record<string, unknown>) {
  const r = await api(route, { token: me.token, body: { input }, headers: { Prefer: 'wait=60' } });
  expect(r.status).toBeLessThan(300);
  const done = await poll(
    () => api(`/v1/predictions/${r.body.id}`, { token: me.token }),
    (p) => ['succeeded', 'failed', 'canceled'].includes(p.body.status),
    { timeoutMs: 120_000, intervalMs: 200 },
  );
  expect(done.body).toMatchObject({ status: 'succeeded' });
  return done.body as { id: string; model: string; version: string; output: string[] };
}

const text = (p: { output: string[] }) => p.output.join('');

async function engineMetrics(): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${process.env.KILN_ENGINE_METRICS_PORT ?? 9475}/metrics`);
  return res.text();
}

/** The value of a counter's sample whose labels include `label`, 0 when there is none. */
function sample(metrics: string, name: string, label: string): number {
  const line = metrics.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(label));
  return line ? Number(line.split(' ').pop()) : 0;
}

beforeAll(async () => {
  db = testDb();
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-lora-'));
  const a = await newAccount(db, 'lora');
  me = { token: a.token, username: a.account.username };
  const base = await api('/v1/models/kiln/tiny-llama', { token: me.token });
  baseVersion = base.body.latest_version.id;
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await closeDb(db);
});

test('kiln push --lora-for pushes an adapter version of the base; a file that is no adapter, or a base it does not fit, is a 422', async () => {
  const file = path.join(dir, 'pirate.gguf');
  const { embedding, layers, heads, kvHeads, feedForward } = TINY_LLAMA as Required<typeof TINY_LLAMA>;
  await writeLoraGguf(file, { base: { embedding, layers, heads, kvHeads, feedForward }, rank: 8, seed: 5 });
  const env = { ...process.env, KILN_API_URL: API_URL, KILN_API_TOKEN: me.token };
  const { stdout } = await runCli('cli/kiln.ts', ['--json', 'push', '--lora-for', 'kiln/tiny-llama', `${me.username}/pirate`, file], env);
  const version = JSON.parse(stdout.trim().split('\n').pop()!);
  adapterVersion = version.id;
  expect(version.settings).toMatchObject({ loraBase: baseVersion });
  expect(version.task).toBe('text-generation');
  const base = await api(`/v1/models/kiln/tiny-llama/versions/${baseVersion}`, { token: me.token });
  // Its own context and weights only: the base's weights are not counted again.
  expect(version.memory_bytes).toBeLessThan(base.body.memory_bytes);

  // A whole model is not an adapter.
  const whole = path.join(dir, 'whole.gguf');
  await writeLlamaGguf(whole, { embedding: 64, layers: 1, heads: 4, feedForward: 64, seed: 9 });
  const refused = await runCli('cli/kiln.ts', ['push', '--lora-for', 'kiln/tiny-llama', `${me.username}/not-adapter`, whole], env).then(
    () => undefined,
    (err: { stderr: string }) => err.stderr,
  );
  expect(refused).toMatch(/422/);
  expect(refused).toMatch(/files\.0\.sha256.*not a LoRA adapter/);

  const noBase = await api(`/v1/models/${me.username}/pirate/versions`, {
    token: me.token,
    body: {
      files: [{ path: 'pirate.gguf', sha256: version.files[0].sha256, size: version.files[0].size }],
      lora_for: 'kiln/no-such-model',
    },
  });
  expect(noBase.status).toBe(422);
  expect(noBase.body.invalid_fields[0].field).toBe('lora_for');
});

test('an adapter runs by its name, by a lora input and by OpenAI model owner/base:adapter: greedy output differs from the base and repeats', async () => {
  const base = await predict('/v1/models/kiln/tiny-llama/predictions', greedy);
  // The base is loaded now: from here on, no weights load again (other tests may have loaded it before).
  const before = await engineMetrics();
  const byName = await predict(`/v1/models/${me.username}/pirate/predictions`, greedy);
  expect(byName).toMatchObject({ model: `${me.username}/pirate`, version: adapterVersion });
  expect(text(byName)).not.toBe(text(base));
  expect(text(byName).length).toBeGreaterThan(0);

  // From here the adapter's sequence holds this prompt (prefix caching), so each later run
  // evaluates only its last token again: the same computation every time, but not bit for bit the
  // cold run's (llama.cpp's logits differ in the last bits between a token evaluated in a batch and
  // alone, which can flip a near tie of random weights), so the repeats are compared with each other.
  const again = await predict(`/v1/models/${me.username}/pirate/predictions`, greedy);
  expect(text(again)).not.toBe(text(base));
  const byInput = await predict('/v1/models/kiln/tiny-llama/predictions', { ...greedy, lora: `${me.username}/pirate` });
  expect(byInput).toMatchObject({ model: `${me.username}/pirate`, version: adapterVersion });
  expect(text(byInput)).toBe(text(again));
  const baseAgain = await predict('/v1/models/kiln/tiny-llama/predictions', greedy);
  expect(text(baseAgain)).toBe(text(base));

  const openai = await api('/openai/v1/completions', {
    token: me.token,
    body: { model: `kiln/tiny-llama:${me.username}/pirate`, prompt: greedy.prompt, max_tokens: 16, temperature: 0, seed: 1 },
  });
  expect(openai.status).toBe(200);
  expect(openai.body.choices[0].text).toBe(text(again));

  // Usage names the adapter: its model and version.
  const [usage] = await db.select().from(usageRecords).where(eq(usageRecords.predictionId, byInput.id));
  expect(usage).toMatchObject({ model: `${me.username}/pirate`, versionId: adapterVersion });

  // The node holds the base once and the adapter on it, and says so; the adapter loaded as a
  // context on the base's weights, which did not load again, and never as a model of its own.
  const holder = (await liveNodes(db)).find((n) => n.loaded.some((l) => l.versionId === adapterVersion))!;
  expect(holder.loaded.filter((l) => l.versionId === baseVersion)).toHaveLength(1);
  expect(holder.loaded.find((l) => l.versionId === adapterVersion)).toMatchObject({ loraFor: baseVersion });
  const after = await engineMetrics();
  const delta = (name: string, label: string) => sample(after, name, label) - sample(before, name, label);
  expect(sample(after, 'kiln_llama_model_loads_total', `version="${baseVersion}"`)).toBeGreaterThanOrEqual(1);
  expect(delta('kiln_llama_model_loads_total', `version="${baseVersion}"`)).toBe(0);
  expect(sample(after, 'kiln_llama_model_loads_total', `version="${adapterVersion}"`)).toBe(0);
  expect(delta('kiln_llama_adapter_loads_total', `version="${adapterVersion}"`)).toBe(1);
});

test('a lora that is not an adapter of the version is a 422 naming input.lora; an unknown adapter in an OpenAI model is a 400 naming model', async () => {
  const notAdapter = await api('/v1/models/kiln/tiny-llama/predictions', {
    token: me.token,
    body: { input: { ...greedy, lora: 'kiln/tiny-embed' } },
  });
  expect(notAdapter.status).toBe(422);
  expect(notAdapter.body.invalid_fields[0]).toMatchObject({ field: 'input.lora' });
  expect(notAdapter.body.detail).toMatch(/not a LoRA adapter/);
  const onAdapter = await api(`/v1/models/${me.username}/pirate/predictions`, {
    token: me.token,
    body: { input: { ...greedy, lora: 'pirate' } },
  });
  expect(onAdapter.status).toBe(422);
  expect(onAdapter.body.invalid_fields[0]).toMatchObject({ field: 'input.lora' });
  const openai = await api('/openai/v1/completions', {
    token: me.token,
    body: { model: 'kiln/tiny-llama:nobody/nothing', prompt: 'hi', max_tokens: 2 },
  });
  expect(openai.status).toBe(400);
  expect(openai.body.error).toMatchObject({ type: 'invalid_request_error', param: 'model' });
});
