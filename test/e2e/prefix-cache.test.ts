/**
 * Prefix caching through the HTTP API: a second request with the same long system prompt finds
 * its tokens already evaluated (cached_tokens in OpenAI's usage, in the prediction's metrics and
 * in the account's usage) and answers exactly as the uncached one did; x-session-affinity keeps a
 * session's predictions on one of two nodes serving the version.
 */
import type { ChildProcess } from 'node:child_process';
import type { Account } from '../../db/accounts';
import { closeDb, type Db } from '../../db/client';
import { addVersion, upsertModel } from '../../db/models';
import { removeNode } from '../../db/nodes';
import { newId } from '../../lib/ids';
import { api, newAccount, nodesHolding, poll, testDb } from '../helpers';
import { startEngineNode } from '../processes';

jest.setTimeout(240_000);

let db: Db;
let me: { account: Account; token: string };
let node2: ChildProcess | undefined;
const NODE1 = process.env.KILN_NODE_ID ?? 'test-node-1';
const NODE2 = `test-session-node-${process.pid}`;

beforeAll(async () => {
  db = testDb();
  me = await newAccount(db, 'prefix');
});
afterAll(async () => {
  node2?.kill('SIGKILL');
  await removeNode(db, NODE2).catch(() => undefined);
  await closeDb(db);
});

/**
 * The trained chat model: "answers as the uncached one did" is about its answer. A random-weight
 * model's greedy choice sits on near-ties between tokens, which the order of llama.cpp's float
 * sums over another batch of the same KV can tip either way.
 */
const TRAINED = 'kiln/smollm2-135m-instruct';

/** A system prompt of some 700 tokens that no earlier request shares (it starts with a fresh id). */
const longSystemPrompt = () => `Session ${newId()}. ${'You keep the kiln at an even heat and answer in few words. '.repeat(60)}`;

const chat = (system: string, user: string, extra: Record<string, unknown> = {}) =>
  api('/openai/v1/chat/completions', {
    token: me.token,
    body: {
      model: TRAINED,
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: user },
      ],
      max_tokens: 16,
      temperature: 0,
      ...extra,
    },
  });

test('a second chat with the same long system prompt reports cached tokens and answers as the uncached one did', async () => {
  const system = longSystemPrompt();
  const cold = await chat(system, 'How hot is it?');
  expect(cold.status).toBe(200);
  expect(cold.body.usage.prompt_tokens).toBeGreaterThan(500);
  // At most a chat template's opening tokens can match what an earlier request left.
  expect(cold.body.usage.prompt_tokens_details.cached_tokens).toBeLessThan(16);

  const again = await chat(system, 'How hot is it?');
  expect(again.status).toBe(200);
  expect(again.body.usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(500);
  expect(again.body.usage.prompt_tokens_details.cached_tokens).toBeLessThan(again.body.usage.prompt_tokens);
  expect(again.body.choices[0].message.content).toBe(cold.body.choices[0].message.content);

  // Another question after the same system prompt: the system prompt is what is reused.
  const other = await chat(system, 'When do we open it?', { stream: true, stream_options: { include_usage: true } });
  expect(other.status).toBe(200);
  const chunks = String(other.body)
    .split('\n')
    .filter((l) => l.startsWith('data: {'))
    .map((l) => JSON.parse(l.slice(6)));
  const usage = chunks.find((c) => c.usage)?.usage;
  expect(usage.prompt_tokens_details.cached_tokens).toBeGreaterThan(500);

  // The Replicate-shaped prediction says so too, and usage meters the cached tokens apart.
  const p = await api(`/v1/predictions/${again.headers.get('x-kiln-prediction-id')}`, { token: me.token });
  expect(p.body.metrics.cached_tokens).toBe(again.body.usage.prompt_tokens_details.cached_tokens);
  const usageRows = await poll(
    () => api('/v1/account/usage', { token: me.token }),
    (r) => r.body.results?.[0]?.predictions === 3,
    { timeoutMs: 10_000, intervalMs: 100 },
  );
  const row = usageRows.body.results[0];
  expect(row.cached_tokens).toBe(
    cold.body.usage.prompt_tokens_details.cached_tokens +
      again.body.usage.prompt_tokens_details.cached_tokens +
      usage.prompt_tokens_details.cached_tokens,
  );
  expect(row.cached_tokens).toBeLessThan(row.input_tokens);
});

test('the Replicate API reports metrics.cached_tokens for a repeated prompt', async () => {
  const prompt = `${newId()} ${'The fire burns low and the clay turns hard. '.repeat(40)}`;
  const run = () =>
    api(`/v1/models/${TRAINED}/predictions`, {
      token: me.token,
      body: { input: { prompt, max_tokens: 8, temperature: 0 } },
      headers: { prefer: 'wait' },
    });
  const first = await run();
  const second = await run();
  expect(first.body.status).toBe('succeeded');
  expect(second.body.status).toBe('succeeded');
  expect(first.body.metrics.cached_tokens).toBeLessThan(16);
  expect(second.body.metrics.cached_tokens).toBeGreaterThan(300);
  expect(second.body.output.join('')).toBe(first.body.output.join(''));
});

test('a bad x-session-affinity header is a 400 naming it', async () => {
  const r = await api('/v1/models/kiln/tiny-llama/predictions', {
    token: me.token,
    body: { input: { prompt: 'hi', max_tokens: 2 } },
    headers: { 'x-session-affinity': 'a'.repeat(300) },
  });
  expect(r.status).toBeGreaterThanOrEqual(400);
  expect(r.status).toBeLessThan(500);
  expect(JSON.stringify(r.body)).toContain('x-session-affinity');
});

test('x-session-affinity keeps a session on one of two nodes that serve the version', async () => {
  node2 = await startEngineNode(NODE2);
  const name = `sessions-${Date.now()}`;
  const model = await upsertModel(db, {
    ownerId: me.account.id,
    owner: me.account.username,
    name,
    task: 'echo-fixture',
    visibility: 'private',
  });
  const version = await addVersion(db, model, {
    task: 'echo-fixture',
    engine: 'echo-fixture',
    files: [],
    memoryBytes: 1,
    settings: { sequences: 4, name },
  });
  // Two replicas, one on each node.
  const deployment = `sessions-${version.id.slice(0, 8)}`;
  const created = await api('/v1/deployments', {
    token: me.token,
    body: { name: deployment, model: `${me.account.username}/${name}`, version: version.id, min_instances: 2, max_instances: 2 },
  });
  expect(created.status).toBe(201);
  try {
    await poll(
      () => nodesHolding(db, version.id, { live: true }),
      (h) => h.includes(NODE1) && h.includes(NODE2),
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    const servedBy = async (session?: string) => {
      const r = await api(`/v1/models/${me.account.username}/${name}/predictions`, {
        token: me.token,
        body: { input: { text: 'hi', sleep_ms: 0 } },
        headers: { prefer: 'wait', ...(session ? { 'x-session-affinity': session } : {}) },
      });
      expect(r.body.status).toBe('succeeded');
      return /slept \d+ ms on node (\S+)/.exec(r.body.logs)?.[1];
    };
    for (const session of ['s-one', 's-two']) {
      const nodes = new Set<string | undefined>();
      for (let i = 0; i < 8; i++) nodes.add(await servedBy(session));
      expect(nodes.size).toBe(1);
      expect([NODE1, NODE2]).toContain([...nodes][0]);
    }
    // Without the header, either node serves (the spread the sessions above are kept out of).
    const spread = new Set<string | undefined>();
    await poll(
      async () => spread.add(await servedBy()),
      (s) => s.size === 2,
      { timeoutMs: 60_000, intervalMs: 0 },
    );
  } finally {
    await api(`/v1/deployments/${me.account.username}/${deployment}`, { token: me.token, method: 'PATCH', body: { min_instances: 0 } });
  }
});
