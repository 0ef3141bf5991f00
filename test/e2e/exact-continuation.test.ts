/**
 * A greedy kiln/tiny-llama generation whose engine node is killed (kill -9, no restart) a quarter
 * of the way through: the next attempt, on another node, restores the failed attempt's latest KV
 * checkpoint from object storage (or prefills the prompt again) and decodes on exactly. The
 * output equals an uninterrupted run's, and the client's SSE stream goes on with no `reset`, no
 * repeated text and one `done`. Prints the time from the kill to `done` against the uninterrupted
 * run's time for the same remaining tokens.
 */
import { eq } from 'drizzle-orm';
import type { ChildProcess } from 'node:child_process';
import { closeDb, type Db } from '../../db/client';
import type { ModelVersion } from '../../db/models';
import { removeNode } from '../../db/nodes';
import { models } from '../../db/schema';
import { TINY_LLAMA } from '../../infra/seed';
import { ensureTestModel } from '../fixtures/models';
import { API_URL, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { startEngineNode } from '../processes';
import { followSse, streamedText } from '../sse-follow';

jest.setTimeout(240_000);

const TOKENS = 1500;
/** Every decode held this long: the kill lands at a quarter however fast the machine is. */
const TOKEN_DELAY_MS = 3;
const NODE = `test-exact-continuation-${process.pid}`;

let db: Db;
let node: ChildProcess | undefined;

beforeAll(() => {
  db = testDb();
});
afterAll(async () => {
  node?.kill('SIGKILL');
  await removeNode(db, NODE).catch(() => undefined);
  await closeDb(db);
});

async function modelPath(version: ModelVersion): Promise<string> {
  const model = await db.query.models.findFirst({ where: eq(models.id, version.modelId) });
  return `${model!.owner}/${model!.name}`;
}

async function read(token: string, id: string) {
  const res = await fetch(`${API_URL}/v1/predictions/${id}`, { headers: { authorization: `Bearer ${token}` } });
  return (await res.json()) as any;
}

/** Greedy, every token forced: TOKENS tokens each time. Each run by its own account, so neither reuses the other's KV. */
async function generate(version: ModelVersion, token: string) {
  const res = await fetch(`${API_URL}/v1/models/${await modelPath(version)}/predictions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ input: { prompt: 'The kiln was', max_tokens: TOKENS, min_tokens: TOKENS, temperature: 0 } }),
  });
  expect(res.status).toBe(201);
  const p = (await res.json()) as { id: string; urls: { stream: string } };
  return { ...p, stream: followSse(() => p.urls.stream) };
}

async function finished(token: string, id: string) {
  return poll(
    () => read(token, id),
    (p) => TERMINAL.includes(p.status),
    { timeoutMs: 180_000, intervalMs: 50 },
  );
}

test('kill -9 of the engine node at a quarter of a greedy generation: the output equals an uninterrupted run, and the stream goes on', async () => {
  node = await startEngineNode(NODE);
  // A fresh version, placed anew on the started node (the smaller one).
  const version = await ensureTestModel(db, `exact-continuation-${Date.now()}`, TINY_LLAMA, { tokenDelayMs: TOKEN_DELAY_MS });
  const reference = (await newAccount(db, 'exact-reference')).token;
  const crashed = (await newAccount(db, 'exact-crashed')).token;

  const whole = await generate(version, reference);
  const uninterrupted = await finished(reference, whole.id);
  expect(uninterrupted.status).toBe('succeeded');
  expect(uninterrupted.logs).toContain(`on node ${NODE}`);
  await whole.stream.finished;

  const run = await generate(version, crashed);
  // Killed once a quarter of the tokens reached the client.
  const quarter = (uninterrupted.output as string[]).join('').length / 4;
  await poll(
    async () => streamedText(run.stream.events).length,
    (n) => n >= quarter,
    { timeoutMs: 120_000, intervalMs: 5 },
  );
  node.kill('SIGKILL');
  const killedAt = Date.now();
  const streamedAtKill = streamedText(run.stream.events).length;
  await run.stream.finished;
  const doneAt = Date.now();
  const p = await finished(crashed, run.id);

  expect({ status: p.status, tokens: p.metrics?.output_token_count }).toEqual({ status: 'succeeded', tokens: TOKENS });
  expect(p.logs).toMatch(new RegExp(`Attempt 1 failed on node ${NODE}`));
  expect(p.logs).toMatch(/Restored the failed attempt's KV checkpoint at token \d+|No KV checkpoint of the failed attempt was usable/);
  expect(p.logs).not.toContain('differed from the streamed text');
  const text = (p.output as string[]).join('');
  expect(text).toBe((uninterrupted.output as string[]).join(''));

  // One generation for the client: no reset, the text once, one done.
  const events = run.stream.events;
  expect(events.filter((e) => e.event === 'reset')).toEqual([]);
  expect(events.filter((e) => e.event === 'done')).toHaveLength(1);
  expect(
    events
      .filter((e) => e.event === 'output')
      .map((e) => e.data)
      .join(''),
  ).toBe(text);

  const remaining = 1 - streamedAtKill / text.length;
  const ratio = (doneAt - killedAt) / 1000 / (uninterrupted.metrics.predict_time * remaining);
  const resumed = (p.logs as string).split('\n').find((l) => /KV checkpoint/.test(l));
  console.log(
    `kill at ${((1 - remaining) * 100).toFixed(0)} % of the text; kill → done ${(doneAt - killedAt) / 1000} s; ` +
      `uninterrupted remaining ${(uninterrupted.metrics.predict_time * remaining).toFixed(2)} s; ratio ${ratio.toFixed(2)}×\n${resumed}`,
  );
});
