/**
 * Issue 36's fault targets, through HTTP with the official `openai` client: a background response
 * streams (kiln/tiny-llama's weights, paced so that it lasts on any machine) while one part of the
 * stack dies: the API the client reads from, the control worker, the engine node generating it,
 * the Temporal server. The client's connection drops at the fault (the API's death drops it; for
 * the others the client drops it itself, as a flaky network would), and it comes back with
 * `GET /responses/{id}?stream=true&starting_after=N` until the stream ends. What it then holds is
 * one whole response: sequence numbers 0, 1, 2… with none missing and none twice, and deltas that
 * add up to the stored output_text. Each run prints its transcript's figures.
 */
import type { ChildProcess } from 'node:child_process';
import OpenAI from 'openai';
import type { ResponseCreateParamsStreaming, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { closeDb, type Db } from '../../db/client';
import type { ModelVersion } from '../../db/models';
import { removeNode } from '../../db/nodes';
import { TINY_LLAMA } from '../../infra/seed';
import { killSuiteProcess, restartTemporal, startApi } from '../chaos';
import { ensureTestModel } from '../fixtures/models';
import { API_URL, api, newAccount, poll, testDb } from '../helpers';
import { startEngineNode } from '../processes';
import { freePort } from '../receiver';

jest.setTimeout(240_000);

/** Every decode held this long: 200 tokens last at least 4 s, on a laptop or an H100. */
const TOKEN_DELAY_MS = 20;
const TOKENS = 200;
const ENGINE_NODE = `test-responses-crash-node-${process.pid}`;
const ENDS = ['response.completed', 'response.incomplete', 'response.failed'];

let db: Db;
let token: string;
/** The paced model: its version, and the path the Responses API names it by. */
let paced: { version: ModelVersion; path: string };
let api2: ChildProcess | undefined;
let node: ChildProcess | undefined;

beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'responses-crash')).token;
  paced = await pacedModel(`responses-crash-${Date.now()}`);
});
afterAll(async () => {
  api2?.kill('SIGKILL');
  node?.kill('SIGKILL');
  await removeNode(db, ENGINE_NODE).catch(() => undefined);
  await closeDb(db);
});

const clientOf = (base: string) => new OpenAI({ apiKey: token, baseURL: `${base}/openai/v1`, maxRetries: 0 });
/** A model of its own with kiln/tiny-llama's weights, every decode held TOKEN_DELAY_MS (ensureTestModel's owner is kiln-test). */
const pacedModel = async (name: string) => ({
  version: await ensureTestModel(db, name, TINY_LLAMA, { tokenDelayMs: TOKEN_DELAY_MS }),
  path: `kiln-test/${name}`,
});
const predictionOf = async (responseId: string) => (await api(`/v1/predictions/${responseId.replace(/^resp_/, '')}`, { token })).body;
const deltas = (events: ResponseStreamEvent[]) =>
  events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');

/** A client that reads a response's stream to its end, coming back with starting_after whenever its connection drops. */
interface ResumingReader {
  events: ResponseStreamEvent[];
  /** The connections after the first. */
  reconnects: () => number;
  /** Drops the connection now, as a network would. */
  drop: () => void;
  finished: Promise<void>;
}

function readResuming(openai: OpenAI, body: ResponseCreateParamsStreaming): ResumingReader {
  const events: ResponseStreamEvent[] = [];
  let connection = new AbortController();
  let reconnects = 0;
  const ended = () => ENDS.includes(events.at(-1)?.type ?? '');
  const finished = (async () => {
    let stream: AsyncIterable<ResponseStreamEvent> = await openai.responses.create(body, { signal: connection.signal });
    for (;;) {
      try {
        for await (const e of stream) {
          events.push(e);
          if (ended()) return;
        }
      } catch {
        // The connection dropped: come back for what came after the last event held.
      }
      if (ended()) return;
      reconnects++;
      const id = (events[0] as { response: { id: string } }).response.id;
      // A resume that fails (the API is still down) is tried again until the API answers.
      stream = await poll(
        () => {
          connection = new AbortController();
          return openai.responses
            .retrieve(id, { stream: true, starting_after: events.at(-1)!.sequence_number }, { signal: connection.signal })
            .then(
              (s): AsyncIterable<ResponseStreamEvent> | undefined => s,
              () => undefined,
            );
        },
        (s) => s !== undefined,
        { timeoutMs: 120_000, intervalMs: 250 },
      ).then((s) => s!);
    }
  })();
  return { events, reconnects: () => reconnects, drop: () => connection.abort(), finished };
}

/** Greedy, every token forced (min_tokens, vLLM's extension): the whole answer is TOKENS tokens, every time. */
const background = (model: { path: string }, input: string): ResponseCreateParamsStreaming =>
  ({
    model: model.path,
    input,
    max_output_tokens: TOKENS,
    min_tokens: TOKENS,
    temperature: 0,
    background: true,
    stream: true,
  }) as ResponseCreateParamsStreaming;

/** Deltas are arriving at the client: the moment to break something. Returns how many events it holds then. */
async function untilStreaming(reader: ResumingReader): Promise<number> {
  await poll(
    async () => reader.events.filter((e) => e.type === 'response.output_text.delta').length,
    (n) => n >= 5,
    { timeoutMs: 120_000, intervalMs: 20 },
  );
  return reader.events.length;
}

/** A read that rides out a dependency's restart: anything but an answer counts as "not yet". */
const retrieveLater = (openai: OpenAI, id: string) =>
  openai.responses.retrieve(id).then(
    (r) => r,
    () => undefined,
  );

/**
 * The end every fault must leave: the response ran to its end (TOKENS tokens, so `incomplete` for
 * max_output_tokens, as OpenAI says it), with one output item; the client's transcript is numbered
 * 0…n−1 across its connections, holds one end event, has deltas from after the fault, and its
 * deltas are the stored output_text; and a reader of the whole stream afterwards gets the same events.
 */
async function expectOneWholeResponse(fault: string, openai: OpenAI, reader: ResumingReader, eventsBeforeFault: number) {
  await reader.finished;
  const events = reader.events;
  const id = (events[0] as { response: { id: string } }).response.id;
  const stored = await poll(
    () => retrieveLater(openai, id),
    (r) => r !== undefined && !['queued', 'in_progress'].includes(r.status!),
    { timeoutMs: 120_000, intervalMs: 250 },
  );
  const prediction = await predictionOf(id);
  const seqs = events.map((e) => e.sequence_number);
  const transcript = deltas(events);
  console.log(
    `${fault}: ${events.length} events (sequence ${seqs[0]}…${seqs.at(-1)}), ${eventsBeforeFault} before the fault, ` +
      `${reader.reconnects()} resume(s) with starting_after, ${transcript.length} chars streamed = stored output_text ` +
      `${transcript === stored!.output_text}, status ${stored!.status}, ${prediction.metrics?.output_token_count} tokens`,
  );
  expect({ status: stored!.status, reason: stored!.incomplete_details?.reason, items: stored!.output.length }).toEqual({
    status: 'incomplete',
    reason: 'max_output_tokens',
    items: 1,
  });
  expect({ status: prediction.status, tokens: prediction.metrics?.output_token_count }).toEqual({ status: 'succeeded', tokens: TOKENS });
  expect(reader.reconnects()).toBeGreaterThanOrEqual(1);
  // No gap, no repeat: strictly increasing, and every number from 0.
  expect(seqs.every((s, i) => i === 0 || s > seqs[i - 1])).toBe(true);
  expect(seqs).toEqual(events.map((_, i) => i));
  expect(events.filter((e) => ENDS.includes(e.type)).map((e) => e.type)).toEqual(['response.incomplete']);
  expect(events.slice(eventsBeforeFault).filter((e) => e.type === 'response.output_text.delta').length).toBeGreaterThan(0);
  expect(transcript).toBe(stored!.output_text);
  expect(transcript).toBe((prediction.output as string[]).join(''));
  expect((events.at(-1) as { response: OpenAI.Responses.Response }).response.output).toEqual(stored!.output);
  // A reader of the whole stream afterwards, from any API process, gets the same events.
  const replay: ResponseStreamEvent[] = [];
  for await (const e of await openai.responses.retrieve(id, { stream: true })) replay.push(e);
  expect(replay).toEqual(events);
  return { id, prediction };
}

test('kill -9 of the API a client streams from: the client resumes with starting_after on the restarted API and holds the one response', async () => {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  api2 = await startApi(port);
  const openai = clientOf(base);
  const reader = readResuming(openai, background(paced, 'the API dies'));
  const before = await untilStreaming(reader);

  api2.kill('SIGKILL');
  api2 = await startApi(port);
  await expectOneWholeResponse('kill -9 API', openai, reader, before);
  api2.kill('SIGTERM');
  api2 = undefined;
});

test('kill -9 of the control worker mid-generation: the restarted worker finishes the response; the client resumes whole', async () => {
  const openai = clientOf(API_URL);
  const reader = readResuming(openai, background(paced, 'the control worker dies'));
  const before = await untilStreaming(reader);

  reader.drop();
  await killSuiteProcess('control-worker');
  await expectOneWholeResponse('kill -9 control worker', openai, reader, before);
});

test('the Temporal server restarts mid-generation: the response finishes, and the resumed stream is whole', async () => {
  const openai = clientOf(API_URL);
  const reader = readResuming(openai, background(paced, 'Temporal restarts'));
  const before = await untilStreaming(reader);

  reader.drop();
  const downMs = await restartTemporal();
  console.log(`Temporal was unreachable for ${downMs} ms`);
  await expectOneWholeResponse('Temporal restart', openai, reader, before);
});

test('kill -9 of the engine node mid-generation: the next attempt continues the text; the client resumes with one output', async () => {
  node = await startEngineNode(ENGINE_NODE);
  // A fresh version, so that it is placed anew: on the new node, the smaller one.
  const fresh = await pacedModel(`responses-crash-engine-${Date.now()}`);
  const openai = clientOf(API_URL);
  const reader = readResuming(openai, background(fresh, 'the engine dies'));
  const before = await untilStreaming(reader);
  const id = (reader.events[0] as { response: { id: string } }).response.id;
  const running = await poll(
    () => predictionOf(id),
    (p) => /Warming up .* on node /.test(p.logs ?? ''),
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  expect(running.logs).toContain(`on node ${ENGINE_NODE}`);

  reader.drop();
  node.kill('SIGKILL');
  const { prediction } = await expectOneWholeResponse('kill -9 engine node', openai, reader, before);
  expect(prediction.logs).toMatch(new RegExp(`Attempt 1 failed on node ${ENGINE_NODE}: .*placing the model again`));
  expect(prediction.logs).toMatch(/Continued the output of the failed attempt \(\d+ tokens\)/);
});
