/**
 * Speculative decoding through the HTTP API on real llama.cpp: a version pushed with a draft model
 * (the same generated weights in Q8_0, as `kiln push --draft` sends it) or with input lookup answers
 * greedy requests exactly as the version without, and reports how many drafted tokens it kept.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { push } from '../../cli/push';
import { closeDb, type Db } from '../../db/client';
import { type LlamaSpecInput, writeLlamaGguf } from '../../tools/gguf/gguf-writer';
import { API_URL, api, newAccount, poll, testDb } from '../helpers';

jest.setTimeout(600_000);

let db: Db;
let token: string;
let owner: string;
let dir: string;
const files: Record<string, string> = {};
// Calm blocks: the Q8_0 copy then picks the target's tokens often enough to be a draft (see bench/speculative.ts).
const shape: LlamaSpecInput = { embedding: 128, layers: 2, heads: 4, feedForward: 256, residualScale: 0.05, seed: 1616 };

beforeAll(async () => {
  db = testDb();
  const created = await newAccount(db, 'speculative');
  token = created.token;
  owner = created.account.username;
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-speculative-'));
  for (const [name, spec] of Object.entries({
    target: { ...shape, type: 'F32' },
    draft: { ...shape, type: 'Q8_0' },
    // Same shape, another vocabulary: it cannot draft for the target.
    stranger: { ...shape, type: 'Q8_0', vocabWords: 150 },
  } satisfies Record<string, LlamaSpecInput>)) {
    files[name] = path.join(dir, `${name}.gguf`);
    await writeLlamaGguf(files[name], spec);
  }
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await closeDb(db);
});

const ctx = () => ({ url: API_URL, token });
async function pushModel(name: string, file: string, settings?: Parameters<typeof push>[3]['settings']) {
  await api('/v1/models', { token, body: { owner, name, task: 'text-generation', visibility: 'private' } });
  return push(ctx(), `${owner}/${name}`, [file], { quiet: true, settings });
}

async function greedy(model: string, prompt: string) {
  const r = await api(`/v1/models/${owner}/${model}/predictions`, {
    token,
    body: { input: { prompt, max_tokens: 48, temperature: 0, top_k: 1, seed: 1 } },
    headers: { prefer: 'wait=60' },
  });
  const done = await poll(
    () => api(`/v1/predictions/${r.body.id}`, { token }),
    (p) => ['succeeded', 'failed', 'canceled'].includes(p.body.status),
    { timeoutMs: 300_000 },
  );
  expect(done.body).toMatchObject({ status: 'succeeded', error: null });
  return { text: (done.body.output as string[]).join(''), metrics: done.body.metrics as Record<string, number> };
}

const scrape = async (port: string | undefined, fallback: number) => (await fetch(`http://127.0.0.1:${port ?? fallback}/metrics`)).text();
/** The counter's value summed over the workers (the engine counts the hot path, the control worker the rest). */
async function draftCounter(model: string, outcome: string): Promise<number> {
  const series = `kiln_draft_tokens_total{model="${model}",outcome="${outcome}"} `;
  const texts = await Promise.all([
    scrape(process.env.KILN_ENGINE_METRICS_PORT, 9475),
    scrape(process.env.KILN_CONTROL_METRICS_PORT, 9474),
  ]);
  return texts
    .map((t) => t.split('\n').find((l) => l.startsWith(series)))
    .reduce((n, line) => n + (line ? Number(line.slice(series.length)) : 0), 0);
}

test('greedy output is the same with a Q8_0 draft, with input lookup and without; the metrics give the acceptance rate', async () => {
  await pushModel('draft', files.draft);
  await pushModel('plain', files.target);
  // minConfidence 0: random weights are never sure of a token; minDraftTokens: the target waits for
  // a draft, which it would otherwise outrun on a model this small, and every step is checked here.
  const drafted = await pushModel('with-draft', files.target, {
    speculative: { type: 'draft', model: `${owner}/draft`, minConfidence: 0, minDraftTokens: 4, maxDraftTokens: 4 },
  });
  await pushModel('with-lookup', files.target, { speculative: { type: 'input_lookup' } });
  const version = await api(`/v1/models/${owner}/with-draft/versions/${drafted.id}`, { token });
  expect(version.body.settings.speculative).toMatchObject({ type: 'draft', model: `${owner}/draft`, version: expect.any(String) });

  let accepted = 0;
  let rejected = 0;
  for (const prompt of ['the river and the old house near the garden', 'kiln fire clay glaze kiln fire clay glaze kiln fire']) {
    const plain = await greedy('plain', prompt);
    expect(plain.text.length).toBeGreaterThan(0);
    expect(plain.metrics.draft_tokens_accepted).toBeUndefined();
    const withDraft = await greedy('with-draft', prompt);
    expect(withDraft.text).toBe(plain.text);
    const lookup = await greedy('with-lookup', prompt);
    expect(lookup.text).toBe(plain.text);
    const m = withDraft.metrics;
    expect(m.draft_tokens_accepted + m.draft_tokens_rejected).toBeGreaterThan(0);
    expect(m.draft_acceptance_rate).toBeCloseTo(m.draft_tokens_accepted / (m.draft_tokens_accepted + m.draft_tokens_rejected), 3);
    accepted += m.draft_tokens_accepted;
    rejected += m.draft_tokens_rejected;
  }
  // Some drafted tokens were kept (the rate is reported, not promised).
  expect(accepted).toBeGreaterThan(0);

  // The target as its own draft agrees with itself: a check keeps every drafted token, not just the
  // first (node-llama-cpp 3.22.1 kept one of each four here until patches/ fixed its draft check).
  const self = await pushModel('self-draft', files.target, {
    speculative: { type: 'draft', model: `${owner}/plain`, minConfidence: 0, minDraftTokens: 4, maxDraftTokens: 4 },
  });
  expect(self.id).toBeDefined();
  const prompt = 'the river and the old house near the garden';
  const selfDrafted = await greedy('self-draft', prompt);
  expect(selfDrafted.text).toBe((await greedy('plain', prompt)).text);
  expect(selfDrafted.metrics.draft_tokens_accepted).toBeGreaterThan(30);
  expect(selfDrafted.metrics.draft_acceptance_rate).toBeGreaterThan(0.75);
  const model = `${owner}/with-draft`;
  await poll(
    async () => [await draftCounter(model, 'accepted'), await draftCounter(model, 'rejected')],
    ([a, r]) => a === accepted && r === rejected,
  );
});

test('a draft model of another vocabulary, or one that does not exist, is refused at push with a 422 naming settings.speculative.model', async () => {
  await pushModel('stranger', files.stranger);
  for (const model of [`${owner}/stranger`, `${owner}/no-such-model`]) {
    const err = await pushModel(`target-${model.split('/')[1]}`, files.target, { speculative: { type: 'draft', model } }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/422/);
    expect(err?.message).toContain('settings.speculative.model');
  }
  const bad = await api(`/v1/models/${owner}/plain/versions`, {
    token,
    body: { files: [{ path: 'model.gguf', sha256: '0'.repeat(64), size: 1 }], settings: { speculative: { type: 'draft' } } },
  });
  expect(bad.status).toBe(422);
  expect(JSON.stringify(bad.body)).toContain('settings.speculative.model');
});
