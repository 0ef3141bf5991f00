/**
 * The Responses API through the official `openai` client, unchanged but for its baseURL: every
 * response is a prediction of the chat task, and its stream is numbered from the prediction's
 * durable event log, so a stream resumed with starting_after has no gap and no repeat.
 */
import { eq } from 'drizzle-orm';
import OpenAI from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { closeDb, type Db } from '../../db/client';
import { nodes, responses, sessionAffinities } from '../../db/schema';
import { pacedLlama } from '../fixtures/models';
import { API_URL, api, newAccount, poll, testDb } from '../helpers';
import { specCheckedFetch } from '../spec-checked-fetch';

jest.setTimeout(120_000);

const MODEL = 'kiln/tiny-llama';
const PACED = 'kiln-test/paced-llama';

let db: Db;
let token: string;
let openai: OpenAI;
const spec = specCheckedFetch();
beforeAll(async () => {
  db = testDb();
  await pacedLlama(db);
  token = (await newAccount(db, 'responses')).token;
  openai = new OpenAI({ apiKey: token, baseURL: `${API_URL}/openai/v1`, maxRetries: 0, fetch: spec.fetch });
});
afterEach(() => expect(spec.problems.splice(0)).toEqual([]));
afterAll(async () => {
  expect(spec.seen.length).toBeGreaterThan(5);
  await closeDb(db);
});

const predictionOf = async (responseId: string) => (await api(`/v1/predictions/${responseId.replace(/^resp_/, '')}`, { token })).body;

async function collect(stream: AsyncIterable<ResponseStreamEvent>, until?: (e: ResponseStreamEvent) => boolean) {
  const events: ResponseStreamEvent[] = [];
  for await (const e of stream) {
    events.push(e);
    if (until?.(e)) break;
  }
  return events;
}

const deltas = (events: ResponseStreamEvent[]) =>
  events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');

test('create: one prediction of the chat task, the request echoed, and retrieve and input_items read it back', async () => {
  const r = await openai.responses.create({
    model: MODEL,
    instructions: 'You are terse.',
    input: 'Say something about kilns.',
    max_output_tokens: 12,
    temperature: 0.5,
    metadata: { case: 'plain' },
    service_tier: 'auto',
    prompt_cache_key: 'kilns',
    safety_identifier: 'user-1',
    truncation: 'disabled',
    user: 'someone',
  });
  expect(r.id).toMatch(/^resp_/);
  expect(['completed', 'incomplete']).toContain(r.status);
  expect(r).toMatchObject({
    object: 'response',
    model: MODEL,
    metadata: { case: 'plain' },
    service_tier: 'auto',
    prompt_cache_key: 'kilns',
  });
  const p = await predictionOf(r.id);
  expect(p.status).toBe('succeeded');
  expect(r.output_text).toBe(p.output.join(''));
  expect(p.input.messages).toEqual([
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Say something about kilns.' },
  ]);
  expect(r.usage!.output_tokens).toBe(p.metrics.output_token_count);
  expect(r.status).toBe(r.usage!.output_tokens >= 12 ? 'incomplete' : 'completed');
  const again = await openai.responses.retrieve(r.id);
  expect(again).toEqual(r);
  const items = [];
  for await (const item of openai.responses.inputItems.list(r.id)) items.push(item);
  expect(items).toEqual([
    expect.objectContaining({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Say something about kilns.' }] }),
  ]);
});

test('background: answered at once, then polled to the end', async () => {
  const r = await openai.responses.create({ model: MODEL, input: 'In the background.', background: true, max_output_tokens: 16 });
  expect(r.background).toBe(true);
  expect(['queued', 'in_progress']).toContain(r.status);
  const done = await poll(
    () => openai.responses.retrieve(r.id),
    (x) => !['queued', 'in_progress'].includes(x.status!),
  );
  expect(['completed', 'incomplete']).toContain(done.status);
  expect(done.output_text).toBe((await predictionOf(r.id)).output.join(''));
});

test('a create retried with its Idempotency-Key is the same response', async () => {
  const body = { model: MODEL, input: 'Once only.', max_output_tokens: 4 };
  // The openai client sends no Idempotency-Key of its own: the header is Kiln's, as on every create.
  const key = (k: string) => ({ headers: { 'Idempotency-Key': k } });
  const a = await openai.responses.create(body, key(`resp-a-${Date.now()}`));
  const b = await openai.responses.create(body, key(`resp-b-${a.created_at}`));
  const again = await openai.responses.create(body, key(`resp-b-${a.created_at}`));
  expect(again.id).toBe(b.id);
  expect(b.id).not.toBe(a.id);
});

test('stream: events numbered from 0 with no gap; the deltas add up to the output; the SDK’s stream helper agrees', async () => {
  const events = await collect(
    await openai.responses.create({ model: MODEL, input: 'Stream please.', max_output_tokens: 30, stream: true }),
  );
  expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
  expect(events[0].type).toBe('response.created');
  expect(events[1].type).toBe('response.in_progress');
  const last = events.at(-1)!;
  expect(['response.completed', 'response.incomplete']).toContain(last.type);
  const final = (last as { response: OpenAI.Responses.Response }).response;
  const message = final.output[0] as OpenAI.Responses.ResponseOutputMessage;
  const text = (message.content[0] as OpenAI.Responses.ResponseOutputText).text;
  expect(deltas(events)).toBe(text);
  expect(text).toBe((await predictionOf(final.id)).output.join(''));

  const helper = openai.responses.stream({ model: MODEL, input: 'Stream again.', max_output_tokens: 10 });
  let streamed = '';
  helper.on('response.output_text.delta', (e) => (streamed += e.delta));
  const response = await helper.finalResponse();
  expect(streamed).toBe(response.output_text);
});

test('a dropped stream resumes with starting_after: exactly the events missed, then the live ones, the same numbering', async () => {
  // Paced, and held off its end: the drop comes mid-generation.
  const first = await openai.responses.create({
    model: PACED,
    input: 'Keep going.',
    max_output_tokens: 60,
    min_tokens: 60,
    background: true,
    stream: true,
  } as OpenAI.Responses.ResponseCreateParamsStreaming);
  const seen = await collect(first, (e) => e.type === 'response.output_text.delta' && e.sequence_number >= 6);
  const id = (seen[0] as { response: { id: string } }).response.id;
  const after = seen.at(-1)!.sequence_number;
  expect((await openai.responses.retrieve(id)).status).toBe('in_progress');
  const rest = await collect(await openai.responses.retrieve(id, { stream: true, starting_after: after }));
  const all = [...seen, ...rest];
  expect(all.map((e) => e.sequence_number)).toEqual(all.map((_, i) => i));
  // min_tokens holds the end off to max_output_tokens: the answer is cut there.
  expect(['response.completed', 'response.incomplete']).toContain(rest.at(-1)!.type);
  const p = await predictionOf(id);
  expect(deltas(all)).toBe(p.output.join(''));
  // A second reader of the whole stream sees the same events.
  const replay = await collect(await openai.responses.retrieve(id, { stream: true }));
  expect(replay).toEqual(all);
  // The SDK's helper resumes too (it reads the stream and drops what it had).
  const resumed = await collect(openai.responses.stream({ response_id: id, starting_after: after }));
  expect(resumed.map((e) => e.sequence_number)).toEqual(rest.map((e) => e.sequence_number));
});

test('cancel: the prediction is canceled, and cancelling again answers the same', async () => {
  const r = await openai.responses.create({
    model: PACED,
    input: 'Run long.',
    max_output_tokens: 2000,
    min_tokens: 2000,
    background: true,
  } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
  const cancelled = await openai.responses.cancel(r.id);
  expect(cancelled.status).toBe('cancelled');
  expect((await predictionOf(r.id)).status).toBe('canceled');
  expect(await openai.responses.cancel(r.id)).toEqual(cancelled);
  expect((await openai.responses.retrieve(r.id)).status).toBe('cancelled');
});

test('a response that runs again (a retry of its prediction) voids the text streamed before: a reader holding it is told where to read again, and every reader ends with the one answer', async () => {
  const first = await openai.responses.create({
    model: PACED,
    input: 'Start over.',
    max_output_tokens: 150,
    min_tokens: 150,
    background: true,
    stream: true,
  } as OpenAI.Responses.ResponseCreateParamsStreaming);
  const seen = await collect(first, (e) => e.type === 'response.output_text.delta' && e.sequence_number >= 6);
  const id = (seen[0] as { response: { id: string } }).response.id;
  expect((await openai.responses.cancel(id)).status).toBe('cancelled');
  const heldText = deltas(seen);
  expect(heldText.length).toBeGreaterThan(0);

  const retried = await api(`/v1/predictions/${id.replace(/^resp_/, '')}/retry`, { token, body: {} });
  expect(retried.status).toBe(201);
  // The client comes back after the last event it holds, which the retry voided.
  const told = await collect(await openai.responses.retrieve(id, { stream: true, starting_after: seen.at(-1)!.sequence_number })).then(
    () => undefined,
    (err: InstanceType<typeof OpenAI.APIError>) => err.error as { code: string; starting_after: number },
  );
  expect(told).toMatchObject({ code: 'response_restarted', starting_after: expect.any(Number) });
  const kept = seen.filter((e) => e.sequence_number <= told!.starting_after);
  expect(deltas(kept)).toBe('');
  const rest = await collect(await openai.responses.retrieve(id, { stream: true, starting_after: told!.starting_after }));
  const transcript = [...kept, ...rest];
  const seqs = transcript.map((e) => e.sequence_number);
  expect(seqs.every((n, i) => i === 0 || n > seqs[i - 1])).toBe(true);
  expect(['response.completed', 'response.incomplete']).toContain(rest.at(-1)!.type);
  const stored = await openai.responses.retrieve(id);
  expect(deltas(transcript)).toBe(stored.output_text);
  expect(stored.output_text).toBe((await predictionOf(id)).output.join(''));
  // A reader of the whole stream now gets the same events, numbered the same.
  expect(await collect(await openai.responses.retrieve(id, { stream: true }))).toEqual(transcript);
});

test('previous_response_id: the chain continues the conversation in one session, opened where its first turn ran, and the prefix is reused', async () => {
  const r1 = await openai.responses.create({
    model: MODEL,
    instructions: 'Be brief.',
    input: 'My name is Ada.',
    max_output_tokens: 8,
    temperature: 0,
  });
  // The first turn ran from the model's queue, as a chat completion does; its node is the session's now.
  const [{ session }] = await db.select({ session: responses.session }).from(responses).where(eq(responses.id, r1.id));
  const opened = await db
    .select({ nodeId: sessionAffinities.nodeId })
    .from(sessionAffinities)
    .where(eq(sessionAffinities.session, session));
  expect(opened).toHaveLength(1);
  expect(await db.select().from(nodes).where(eq(nodes.id, opened[0].nodeId))).toHaveLength(1);
  const r2 = await openai.responses.create({
    model: MODEL,
    previous_response_id: r1.id,
    input: 'What is my name?',
    max_output_tokens: 8,
    temperature: 0,
  });
  expect(r2.previous_response_id).toBe(r1.id);
  const p2 = await predictionOf(r2.id);
  // Instructions are the request's own; the earlier turn's input and output come before the new input.
  expect(p2.input.messages).toEqual([
    { role: 'user', content: 'My name is Ada.' },
    { role: 'assistant', content: r1.output_text },
    { role: 'user', content: 'What is my name?' },
  ]);
  expect(r2.usage!.input_tokens).toBeGreaterThan(r1.usage!.input_tokens);
  const r3 = await openai.responses.create({
    model: MODEL,
    previous_response_id: r2.id,
    input: 'And again?',
    max_output_tokens: 8,
    temperature: 0,
  });
  // The third turn's prompt starts with the second's whole prompt and answer: that prefix is on the node.
  expect(r3.usage!.input_tokens_details.cached_tokens).toBeGreaterThan(0);
  expect((await predictionOf(r3.id)).input.messages).toHaveLength(5);
});

test('function tools: a function_call item with call_id, and its function_call_output continues the turn', async () => {
  const tools: OpenAI.Responses.FunctionTool[] = [
    {
      type: 'function',
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 12 } },
        required: ['city'],
        additionalProperties: false,
      },
      strict: true,
    },
  ];
  const r1 = await openai.responses.create({
    model: MODEL,
    input: 'Weather in Oslo?',
    tools,
    tool_choice: 'required',
    max_output_tokens: 60,
  });
  expect(r1.status).toBe('completed');
  expect(r1.output).toHaveLength(1);
  const call = r1.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
  expect(call).toMatchObject({ type: 'function_call', name: 'get_weather', status: 'completed' });
  expect(call.call_id).toMatch(/^call_/);
  expect(typeof JSON.parse(call.arguments).city).toBe('string');

  const r2 = await openai.responses.create({
    model: MODEL,
    previous_response_id: r1.id,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"celsius": 3}' }],
    tools,
    max_output_tokens: 12,
  });
  expect(['completed', 'incomplete']).toContain(r2.status);
  const messages = (await predictionOf(r2.id)).input.messages;
  expect(messages.at(-2)).toEqual({
    role: 'assistant',
    content: JSON.stringify({ name: 'get_weather', arguments: JSON.parse(call.arguments) }),
  });
  expect(messages.at(-1)).toEqual({ role: 'user', content: `Result of get_weather (call ${call.call_id}): {"celsius": 3}` });

  // Streamed, the call comes as its item and its arguments.
  const events = await collect(
    await openai.responses.create({
      model: MODEL,
      input: 'Weather in Rome?',
      tools,
      tool_choice: 'required',
      max_output_tokens: 60,
      stream: true,
    }),
  );
  const done = events.find((e) => e.type === 'response.function_call_arguments.done');
  expect(done).toMatchObject({ name: 'get_weather' });
  expect(events.at(-1)!.type).toBe('response.completed');
});

test('item_reference: an item of a stored response stands in for itself; input_items lists it under its own id; one that names nothing is a 400 naming it', async () => {
  const r1 = await openai.responses.create({
    model: MODEL,
    input: [
      // An earlier answer given back with an id of the caller's own, as clients that keep history do.
      {
        type: 'message',
        id: 'note_1',
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: 'Kilns fire clay.', annotations: [] }],
      },
      { role: 'user', content: 'Name a kiln.' },
    ],
    max_output_tokens: 8,
  });
  const answer = r1.output[0] as OpenAI.Responses.ResponseOutputMessage;
  expect(answer.id).toMatch(/^msg_/);
  // No previous_response_id: the answer is found by the id Kiln gave it; the caller's own id needs the chain.
  const r2 = await openai.responses.create({
    model: MODEL,
    input: [
      { type: 'item_reference', id: answer.id },
      { role: 'user', content: 'Another?' },
    ],
    max_output_tokens: 8,
  });
  expect((await predictionOf(r2.id)).input.messages).toEqual([
    { role: 'assistant', content: r1.output_text },
    { role: 'user', content: 'Another?' },
  ]);
  const r3 = await openai.responses.create({
    model: MODEL,
    previous_response_id: r1.id,
    input: [{ type: 'item_reference', id: 'note_1' }],
    max_output_tokens: 8,
  });
  expect((await predictionOf(r3.id)).input.messages.at(-1)).toEqual({ role: 'assistant', content: 'Kilns fire clay.' });
  const listed = [];
  for await (const item of openai.responses.inputItems.list(r2.id, { order: 'asc' })) listed.push(item);
  expect(listed).toEqual([
    { type: 'message', id: answer.id, status: answer.status, role: 'assistant', content: [{ type: 'output_text', text: r1.output_text }] },
    expect.objectContaining({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Another?' }] }),
  ]);
  // Another account's item reads as none, like a missing one.
  const stranger = new OpenAI({ apiKey: (await newAccount(db, 'responses-ref')).token, baseURL: `${API_URL}/openai/v1`, maxRetries: 0 });
  for (const [client, id] of [
    [openai, 'msg_aaaaaaaaaaaaaaaaaaaaaaaaaa'],
    [openai, 'note_1'],
    [stranger, answer.id],
  ] as const) {
    await expect(
      client.responses.create({
        model: MODEL,
        input: [
          { role: 'user', content: 'x' },
          { type: 'item_reference', id },
        ],
      }),
    ).rejects.toMatchObject({ status: 400, param: 'input.1.id' });
  }
});

test('text.format json_schema uses the same grammar as chat completions', async () => {
  const r = await openai.responses.create({
    model: MODEL,
    input: 'A number please.',
    text: {
      format: {
        type: 'json_schema',
        name: 'n',
        schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false },
      },
    },
    max_output_tokens: 40,
  });
  expect(r.status).toBe('completed');
  expect(Number.isInteger(JSON.parse(r.output_text).n)).toBe(true);
});

test('errors: what Kiln cannot honour is a 400 naming it; another account’s response is a 404 like a missing one; delete', async () => {
  await expect(openai.responses.create({ model: MODEL, input: 'x', tools: [{ type: 'web_search' }] })).rejects.toMatchObject({
    status: 400,
    param: 'tools.0.type',
  });
  await expect(openai.responses.create({ model: MODEL, input: 'x', reasoning: { effort: 'high' } })).rejects.toMatchObject({
    status: 400,
    param: 'reasoning.effort',
  });
  await expect(openai.responses.create({ model: MODEL, input: 'x', truncation: 'auto' })).rejects.toMatchObject({
    status: 400,
    param: 'truncation',
  });
  // A field of the body's own input is named by its whole path.
  await expect(
    openai.responses.create({
      model: MODEL,
      input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x', detail: 'auto' }] }],
    }),
  ).rejects.toMatchObject({ status: 400, param: expect.stringMatching(/^input\.0\.content/) });

  const mine = await openai.responses.create({ model: MODEL, input: 'mine', max_output_tokens: 2 });
  const other = new OpenAI({
    apiKey: (await newAccount(db, 'responses-other')).token,
    baseURL: `${API_URL}/openai/v1`,
    maxRetries: 0,
    fetch: spec.fetch,
  });
  const missing = 'resp_' + 'x'.repeat(mine.id.length - 5);
  const errorOf = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (e: InstanceType<typeof OpenAI.APIError>) => ({ status: e.status, error: e.error }),
    );
  const theirs = await errorOf(other.responses.retrieve(mine.id));
  const none = await errorOf(other.responses.retrieve(missing));
  expect(theirs!.status).toBe(404);
  expect(JSON.stringify(theirs).replace(mine.id, missing)).toBe(JSON.stringify(none));
  await expect(other.responses.create({ model: MODEL, input: 'x', previous_response_id: mine.id })).rejects.toMatchObject({
    status: 404,
    param: 'previous_response_id',
  });
  await expect(other.responses.delete(mine.id)).rejects.toMatchObject({ status: 404 });

  await openai.responses.delete(mine.id);
  await expect(openai.responses.retrieve(mine.id)).rejects.toMatchObject({ status: 404 });
  // The prediction stays: it is the usage record.
  expect((await predictionOf(mine.id)).status).toBe('succeeded');
});
