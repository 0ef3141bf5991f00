/**
 * "What survives a crash", on the real engine: a llama.cpp generation (kiln/tiny-llama's weights,
 * paced by the fixture-only token delay so it lasts on any machine) streams over SSE while one
 * part of the stack dies: the API the client reads from, the control worker, the engine node
 * generating it, the Temporal server, Postgres. The client, reconnecting as EventSource does,
 * ends with the prediction's whole generation, and the webhook receiver gets one `completed`.
 * Only the engine's death moves the generation to another attempt, which continues the text the
 * failed one streamed: SSE and OpenAI clients see one seamless generation, with no `reset`.
 */
import type { ChildProcess } from 'node:child_process';
import { eq, sql } from 'drizzle-orm';
import { closeDb, type Db } from '../../db/client';
import type { ModelVersion } from '../../db/models';
import { removeNode } from '../../db/nodes';
import { models } from '../../db/schema';
import { outputWebhookId, webhookWorkflowId } from '../../domain/contracts';
import { TINY_LLAMA } from '../../infra/seed';
import { killSuiteProcess, restartPostgres, restartTemporal, startApi } from '../chaos';
import { ensureTestModel } from '../fixtures/models';
import { API_URL, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { startEngineNode } from '../processes';
import { freePort, type Receiver, startReceiver } from '../receiver';
import { readSse } from '../sse';
import { type FollowedStream, followSse, streamedText } from '../sse-follow';
import { testTemporal } from '../temporal';

jest.setTimeout(240_000);

/** Every decode held this long: 200 tokens last at least 4 s, on a laptop or an H100. */
const TOKEN_DELAY_MS = 20;
const TOKENS = 200;
const NODE2 = `test-crash-llama-node-2-${process.pid}`;
const NODE3 = `test-crash-llama-node-3-${process.pid}`;

let db: Db;
let token: string;
let receiver: Receiver;
let temporal: Awaited<ReturnType<typeof testTemporal>>;
let paced: ModelVersion;
let api2: ChildProcess | undefined;
let node2: ChildProcess | undefined;
let node3: ChildProcess | undefined;

beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'crash-llama')).token;
  receiver = await startReceiver();
  temporal = await testTemporal();
  paced = await ensureTestModel(db, `crash-llama-${Date.now()}`, TINY_LLAMA, { tokenDelayMs: TOKEN_DELAY_MS });
});
afterAll(async () => {
  api2?.kill('SIGKILL');
  node2?.kill('SIGKILL');
  node3?.kill('SIGKILL');
  await removeNode(db, NODE2).catch(() => undefined);
  await removeNode(db, NODE3).catch(() => undefined);
  await temporal.close();
  await receiver.close();
  await closeDb(db);
});

async function modelPath(version: ModelVersion): Promise<string> {
  const model = await db.query.models.findFirst({ where: eq(models.id, version.modelId) });
  return `${model!.owner}/${model!.name}`;
}

/** A read that rides out a dependency's restart: anything but a 200 counts as "not yet". */
async function readPrediction(id: string) {
  try {
    const res = await fetch(`${API_URL}/v1/predictions/${id}`, { headers: { authorization: `Bearer ${token}` } });
    return res.status === 200 ? ((await res.json()) as any) : { status: `http ${res.status}` };
  } catch (err) {
    return { status: `unreachable: ${(err as Error).message}` };
  }
}

/**
 * Greedy, every token forced, a fixed seed: the whole generation is TOKENS tokens, every time.
 * The create is retried as a client honouring Retry-After would: after a Postgres restart the
 * API may answer 503 once (a pooled connection that died with the old server).
 */
async function startGeneration(version: ModelVersion, prompt: string, base = API_URL, webhookEvents = ['completed']) {
  const url = `${base}/v1/models/${await modelPath(version)}/predictions`;
  const key = `crash-llama-${prompt}-${Date.now()}`;
  const create = async () => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({
        input: { prompt, max_tokens: TOKENS, min_tokens: TOKENS, temperature: 0, seed: 21 },
        webhook: receiver.url,
        webhook_events_filter: webhookEvents,
      }),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const created = await poll(create, (r) => r.status !== 503, { timeoutMs: 30_000, intervalMs: 500 });
  // 200: a retried create found the prediction the first try made.
  expect({ created: [200, 201].includes(created.status), response: created }).toMatchObject({ created: true });
  return created.body as { id: string; urls: { stream: string } };
}

/** Tokens are arriving at the client: the moment to break something. */
async function untilStreaming(stream: FollowedStream): Promise<number> {
  await poll(
    async () => stream.events.filter((e) => e.event === 'output').length,
    (n) => n >= 5,
    { timeoutMs: 120_000, intervalMs: 20 },
  );
  return stream.events.length;
}

/**
 * The end every fault must leave: the prediction succeeded with its whole generation; the
 * client's stream holds exactly that text, with no event twice, `resets` resets (a number, or
 * the most there may be) and one `done`;
 * more of it came after the fault; and the receiver got one `completed`, delivered once.
 */
async function expectOneWholeGeneration(
  id: string,
  stream: FollowedStream,
  eventsBeforeFault: number,
  resets: number | { atMost: number } = 0,
) {
  await stream.finished;
  const p = await poll(
    () => readPrediction(id),
    (r) => TERMINAL.includes(r.status),
    { timeoutMs: 120_000, intervalMs: 250 },
  );
  expect({ status: p.status, error: p.error, tokens: p.metrics?.output_token_count }).toEqual({
    status: 'succeeded',
    error: null,
    tokens: TOKENS,
  });
  const ids = stream.events.filter((e) => e.id !== undefined).map((e) => Number(e.id));
  expect(ids).toEqual([...new Set(ids)].sort((a, b) => a - b));
  expect(stream.events.filter((e) => e.event === 'done')).toEqual([expect.objectContaining({ data: '{}' })]);
  const resetCount = stream.events.filter((e) => e.event === 'reset').length;
  if (typeof resets === 'number') expect(resetCount).toBe(resets);
  else expect(resetCount).toBeLessThanOrEqual(resets.atMost);
  expect(stream.events.slice(eventsBeforeFault).filter((e) => e.event === 'output').length).toBeGreaterThan(0);
  expect(streamedText(stream.events)).toBe((p.output as string[]).join(''));

  const completedId = webhookWorkflowId(id, 'completed', 1);
  const completed = () => receiver.received.filter((h) => h.json?.id === id && h.headers['webhook-id'] === completedId);
  await poll(
    async () => receiver.accepted.filter((h) => h.json?.id === id && h.headers['webhook-id'] === completedId).length,
    (n) => n >= 1,
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  // Once its delivery workflow has closed, no other delivery of it can come.
  await poll(
    () =>
      temporal.client.workflow
        .getHandle(completedId)
        .describe()
        .then(
          (d) => d.status.name,
          (err: Error) => err.message,
        ),
    (s) => s === 'COMPLETED',
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  expect(completed().map((h) => ({ status: h.json.status, output: (h.json.output as string[]).join('') }))).toEqual([
    { status: 'succeeded', output: (p.output as string[]).join('') },
  ]);
  return p;
}

test('kill -9 of the API a client streams from: it reconnects with Last-Event-ID and gets the whole generation once', async () => {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  api2 = await startApi(port);
  const p = await startGeneration(paced, 'the API dies', base);
  const streamUrl = new URL(p.urls.stream);
  streamUrl.host = `127.0.0.1:${port}`;
  const stream = followSse(() => streamUrl.toString());
  const before = await untilStreaming(stream);

  api2.kill('SIGKILL');
  api2 = await startApi(port);
  await expectOneWholeGeneration(p.id, stream, before);
  expect(stream.reconnects).toBeGreaterThanOrEqual(1);
  api2.kill('SIGTERM');
  api2 = undefined;
});

test('kill -9 of the control worker while tokens stream: the restarted worker finishes the prediction', async () => {
  const p = await startGeneration(paced, 'the control worker dies');
  const stream = followSse(() => p.urls.stream);
  const before = await untilStreaming(stream);

  await killSuiteProcess('control-worker');
  await expectOneWholeGeneration(p.id, stream, before);
});

test('the Temporal server restarts while tokens stream: the stream and the prediction finish whole', async () => {
  const p = await startGeneration(paced, 'Temporal restarts');
  const stream = followSse(() => p.urls.stream);
  const before = await untilStreaming(stream);

  const downMs = await restartTemporal();
  console.log(`Temporal was unreachable for ${downMs} ms`);
  // An outage longer than the engine's heartbeat timeout (10 s, on a slow machine) restarts the
  // attempt: then the client gets one reset, and still one whole generation.
  await expectOneWholeGeneration(p.id, stream, before, { atMost: 1 });
});

test('Postgres restarts while tokens stream: no chunk of the stream is lost', async () => {
  const p = await startGeneration(paced, 'Postgres restarts');
  const stream = followSse(() => p.urls.stream);
  const before = await untilStreaming(stream);

  const ms = await restartPostgres();
  console.log(`Postgres restart took ${ms} ms`);
  await poll(
    () =>
      db.execute(sql`select 1`).then(
        () => true,
        () => false,
      ),
    (up) => up,
    { timeoutMs: 60_000, intervalMs: 250 },
  );
  await expectOneWholeGeneration(p.id, stream, before);
});

/** The node a prediction runs on, from its logs, once its first tokens are out. */
async function expectRunningOn(id: string, nodeId: string) {
  const running = await poll(
    () => readPrediction(id),
    (r) => /Warming up .* on node /.test(r.logs ?? ''),
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  expect(running.logs).toContain(`on node ${nodeId}`);
}

test('kill -9 of the engine node mid-generation: the next attempt continues the text, one generation for every client', async () => {
  node2 = await startEngineNode(NODE2);
  // A fresh version, so that it is placed anew: on node 2, the smaller node.
  const fresh = await ensureTestModel(db, `crash-llama-engine-${Date.now()}`, TINY_LLAMA, { tokenDelayMs: TOKEN_DELAY_MS });
  const p = await startGeneration(fresh, 'the engine dies', API_URL, ['output', 'completed']);
  const stream = followSse(() => p.urls.stream);
  const before = await untilStreaming(stream);
  await expectRunningOn(p.id, NODE2);
  // While it runs, GET shows the output so far (read from the stream log).
  const partial = await readPrediction(p.id);
  expect({ status: partial.status, outputs: (partial.output ?? []).length > 0 }).toEqual({ status: 'processing', outputs: true });

  node2.kill('SIGKILL');
  // No reset: attempt 2 continues the text attempt 1 streamed.
  const done = await expectOneWholeGeneration(p.id, stream, before, 0);
  expect(done.logs).toMatch(new RegExp(`Attempt 1 failed on node ${NODE2}: .*placing the model again`));
  expect(done.logs).toMatch(/Continued the output of the failed attempt \(\d+ tokens\)/);
  const full = (done.output as string[]).join('');
  expect(full.startsWith((partial.output as string[]).join(''))).toBe(true);

  // A client that reads the stream afterwards, or that reconnects from inside the failed attempt, gets the same one text.
  const replay = await readSse(p.urls.stream, { until: (e) => e.event === 'done' });
  expect(replay.events.map((e) => e.event)).not.toContain('reset');
  expect(
    replay.events
      .filter((e) => e.event === 'output')
      .map((e) => e.data)
      .join(''),
  ).toBe(full);
  const firstOutput = stream.events.find((e) => e.event === 'output')!;
  const resumed = await readSse(p.urls.stream, { headers: { 'last-event-id': firstOutput.id! }, until: (e) => e.event === 'done' });
  expect(firstOutput.data + streamedText(resumed.events)).toBe(full);

  // Output webhooks of both attempts, and no id of one attempt's taken by the other's: each id names one body.
  const outputs = receiver.received.filter((h) => h.json?.id === p.id && String(h.headers['webhook-id']).includes('-output-'));
  const bodies = new Map<string, Set<string>>();
  for (const h of outputs)
    bodies.set(
      String(h.headers['webhook-id']),
      (bodies.get(String(h.headers['webhook-id'])) ?? new Set()).add(JSON.stringify(h.json.output)),
    );
  expect([...bodies.values()].filter((b) => b.size > 1)).toEqual([]);
  expect(bodies.has(outputWebhookId(p.id, 1, 1))).toBe(true);
  expect(bodies.has(outputWebhookId(p.id, 2, 1))).toBe(true);
  expect(outputWebhookId(p.id, 2, 1)).not.toBe(outputWebhookId(p.id, 1, 1));
  // The killed node's row would draw the next test's placement until it expires.
  await removeNode(db, NODE2);
});

/** Reads an OpenAI chat stream to its end: the prediction's id (a header), the deltas' text, errors, and whether [DONE] came. */
async function openAiChatStream(version: ModelVersion, prompt: string) {
  const res = await fetch(`${API_URL}/openai/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: await modelPath(version),
      messages: [{ role: 'user', content: prompt }],
      max_tokens: TOKENS,
      min_tokens: TOKENS,
      temperature: 0,
      seed: 21,
      stream: true,
    }),
  });
  expect(res.status).toBe(200);
  const id = res.headers.get('x-kiln-prediction-id')!;
  const body = res.text().then((text) => {
    const data = text
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6));
    const chunks = data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d));
    return {
      text: chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').join(''),
      errors: chunks.filter((c) => c.error),
      finish: chunks.map((c) => c.choices?.[0]?.finish_reason).filter(Boolean),
      done: data.at(-1) === '[DONE]',
    };
  });
  return { id, body };
}

test('kill -9 of the engine node under an OpenAI chat stream: the OpenAI client and an SSE client each get the one generation', async () => {
  node3 = await startEngineNode(NODE3);
  const fresh = await ensureTestModel(db, `crash-llama-openai-${Date.now()}`, TINY_LLAMA, { tokenDelayMs: TOKEN_DELAY_MS });
  const chat = await openAiChatStream(fresh, 'the engine dies under a chat');
  const created = await readPrediction(chat.id);
  const stream = followSse(() => created.urls.stream);
  await untilStreaming(stream);
  await expectRunningOn(chat.id, NODE3);

  node3.kill('SIGKILL');
  const answer = await chat.body;
  await stream.finished;
  const p = await poll(
    () => readPrediction(chat.id),
    (r) => TERMINAL.includes(r.status),
    { timeoutMs: 120_000, intervalMs: 250 },
  );
  expect({ status: p.status, tokens: p.metrics?.output_token_count }).toEqual({ status: 'succeeded', tokens: TOKENS });
  expect(p.logs).toMatch(new RegExp(`Attempt 1 failed on node ${NODE3}: .*placing the model again`));
  const full = (p.output as string[]).join('');
  expect({ errors: answer.errors, finish: answer.finish, done: answer.done }).toEqual({ errors: [], finish: ['length'], done: true });
  expect(answer.text).toBe(full);
  expect(stream.events.map((e) => e.event)).not.toContain('reset');
  expect(streamedText(stream.events)).toBe(full);
});
