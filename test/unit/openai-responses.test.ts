/** The Responses API's mapping: a create body as a chat-task input, a prediction as a response object, its log as numbered events. */
import { conversationMessages, storedInputItems } from '../../api/openai/responses-conversation';
import { type ResponseEvent, ResponseEvents } from '../../api/openai/responses-events';
import {
  outputItems,
  type PredictionState,
  type ResponseState,
  responseInput,
  responseObject,
  responsePlan,
  responseStatus,
  type StoredRequest,
} from '../../api/openai/responses-object';
import { type CreateResponseRequest, createResponseBody, type FunctionTool, responseBody } from '../../api/openai/responses-protocol';
import { type NumberedEvent, ResponseStreamReader } from '../../api/openai/responses-reader';
import { resolveItemReferences } from '../../api/openai/responses-references';

const weather: FunctionTool = {
  type: 'function',
  name: 'get_weather',
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
};

const issuesOf = (body: unknown) => {
  const r = createResponseBody.safeParse(body);
  return r.success ? [] : r.error.issues.map((i) => [...i.path, ...('keys' in i ? i.keys : [])].join('.'));
};

function state(request: Partial<CreateResponseRequest>, contextSize: number | null = 4096): ResponseState {
  const { input: _input, ...rest } = { model: 'kiln/m', input: 'x', ...request };
  return { id: 'resp_p1', previousResponseId: null, request: rest as StoredRequest, contextSize, createdAt: new Date(1_700_000_000_000) };
}

function prediction(over: Partial<PredictionState>): PredictionState {
  return {
    id: 'p1',
    status: 'succeeded',
    output: ['Hello', ' there'],
    error: null,
    metrics: {},
    completedAt: new Date(1_700_000_005_000),
    ...over,
  };
}

describe('create body', () => {
  test('takes a string, easy messages and typed items, and refuses what Kiln cannot honour by name', () => {
    expect(issuesOf({ model: 'a/b', input: 'hi' })).toEqual([]);
    expect(
      issuesOf({
        model: 'a/b',
        input: [
          { role: 'user', content: 'hi' },
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'yo', annotations: [] }] },
          { type: 'function_call', call_id: 'c1', name: 'get_weather', arguments: '{}' },
          { type: 'function_call_output', call_id: 'c1', output: '{"t":3}' },
        ],
        service_tier: 'auto',
        prompt_cache_key: 'k',
        safety_identifier: 's',
        truncation: 'disabled',
        store: true,
        metadata: { a: 'b' },
      }),
    ).toEqual([]);
    expect(issuesOf({ model: 'a/b', input: 'hi', truncation: 'auto' })).toEqual(['truncation']);
    expect(issuesOf({ model: 'a/b', input: 'hi', tools: [{ type: 'web_search' }] })[0]).toBe('tools.0.type');
    expect(issuesOf({ model: 'a/b', input: 'hi', reasoning: { effort: 'high' } })).toEqual(['reasoning.effort']);
    expect(issuesOf({ model: 'a/b', input: 'hi', top_logprobs: 3 })).toEqual(['top_logprobs']);
    expect(issuesOf({ model: 'a/b', input: 'hi', frobnicate: 1 })).toEqual(['frobnicate']);
    expect(issuesOf({ model: 'a/b', input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] })[0]).toMatch(
      /^input\.0\.content/,
    );
    expect(issuesOf({ model: 'a/b', input: 'hi', background: true, store: false })).toEqual(['store']);
    expect(issuesOf({ model: 'a/b', input: 'hi', tool_choice: 'required' })).toEqual(['tool_choice']);
    expect(issuesOf({ model: 'a/b', input: 'hi', tools: [weather], tool_choice: { type: 'function', name: 'nope' } })).toEqual([
      'tool_choice.name',
    ]);
  });
});

describe('conversation', () => {
  test('items get ids, and a chain reads as chat messages: instructions first, calls grouped, outputs as tool results', () => {
    const first = storedInputItems('What is the weather?', 'p0');
    expect(first).toEqual([
      { type: 'message', id: 'msg_p0_in0', role: 'user', content: [{ type: 'input_text', text: 'What is the weather?' }] },
    ]);
    const calls = outputItems(
      prediction({
        id: 'p0',
        output: ['[{"name":"get_weather","arguments":{"city":"Oslo"}},', '{"name":"get_weather","arguments":{"city":"Rome"}}]'],
      }),
      {
        tools: [{ type: 'function', function: { name: 'get_weather' } }],
        toolMode: 'forced',
        limit: { maxTokens: 100 },
      },
    );
    expect(calls.map((c) => c.type === 'function_call' && [c.id, c.call_id, c.arguments])).toEqual([
      ['fc_p0_0', 'call_p0_0', '{"city":"Oslo"}'],
      ['fc_p0_1', 'call_p0_1', '{"city":"Rome"}'],
    ]);
    const results = storedInputItems(
      [
        { type: 'function_call_output', call_id: 'call_p0_0', output: '3' },
        { type: 'function_call_output', call_id: 'call_p0_1', output: '20' },
      ],
      'p1',
    );
    const messages = conversationMessages(
      [
        { inputItems: first, outputItems: calls },
        { inputItems: results, outputItems: [] },
      ],
      'Be brief.',
    );
    expect(messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'What is the weather?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_p0_0', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
          { id: 'call_p0_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: 'tool', content: '3', tool_call_id: 'call_p0_0' },
      { role: 'tool', content: '20', tool_call_id: 'call_p0_1' },
    ]);
  });

  test('text.format and a forced tool become the task’s json_schema, as on chat completions', () => {
    const ask = [{ role: 'user' as const, content: 'hi' }];
    const format = {
      type: 'json_schema' as const,
      name: 'r',
      schema: { type: 'object' as const, properties: { a: { type: 'number' as const } } },
    };
    const structured = responseInput({ model: 'a/b', text: { format } }, ask, null);
    expect(structured.input.json_schema).toEqual(format.schema);
    expect(structured.input).toMatchObject({ max_tokens: 512, temperature: 1, top_p: 1 });
    const forced = responseInput(
      { model: 'a/b', tools: [weather], tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 40 },
      ask,
      4096,
    );
    expect(forced.plan).toMatchObject({ toolMode: 'forced', limit: { maxTokens: 40, contextSize: 4096 } });
    expect((forced.input.json_schema as { properties: { name: unknown } }).properties.name).toEqual({ const: 'get_weather' });
  });
});

describe('response object', () => {
  test('statuses follow the prediction; an answer cut by max_output_tokens is incomplete', () => {
    const s = state({ max_output_tokens: 2 });
    const plan = responsePlan(s);
    expect(
      ['starting', 'processing', 'failed', 'canceled', 'aborted'].map((status) => responseStatus(prediction({ status }), plan)),
    ).toEqual(['queued', 'in_progress', 'failed', 'cancelled', 'cancelled']);
    const cut = responseObject(s, prediction({ metrics: { input_token_count: 9, output_token_count: 2, cached_tokens: 4 } }));
    expect(cut).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
    expect(cut.usage).toEqual({
      input_tokens: 9,
      input_tokens_details: { cached_tokens: 4 },
      output_tokens: 2,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 11,
    });
    const done = responseObject(state({ metadata: { k: 'v' }, service_tier: 'flex' }), prediction({ metrics: { output_token_count: 2 } }));
    expect(done).toMatchObject({ status: 'completed', metadata: { k: 'v' }, service_tier: 'flex', completed_at: 1_700_000_005 });
    expect(done.output).toEqual([
      {
        type: 'message',
        id: 'msg_p1',
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'Hello there', annotations: [], logprobs: [] }],
      },
    ]);
    // The object is exactly what the API reference documents.
    expect(responseBody.strict().parse(done)).toEqual(done);
    const failed = responseObject(s, prediction({ status: 'failed', error: 'engine died' }));
    expect(failed).toMatchObject({
      status: 'failed',
      error: { code: 'server_error', message: 'engine died' },
      output: [],
      usage: expect.anything(),
    });
  });
});

describe('stream events', () => {
  const run = (s: ResponseState, outputs: string[], final: PredictionState) => {
    const events = new ResponseEvents('p1', responsePlan(s));
    const all: ResponseEvent[] = [
      ...events.start(responseObject(s, final, 'queued'), responseObject(s, final, 'in_progress')),
      ...outputs.flatMap((o) => events.text(o)),
      ...events.end(final, responseObject(s, final)),
    ];
    return all;
  };

  test('text streams as deltas of one message, and the same log always makes the same events', () => {
    const s = state({ background: true });
    const final = prediction({ output: ['Hel', 'lo'], metrics: { output_token_count: 2 } });
    const events = run(s, ['Hel', 'lo'], final);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect((events[0].response as { status: string }).status).toBe('queued');
    expect(events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta)).toEqual(['Hel', 'lo']);
    expect(events.at(-4)).toMatchObject({ type: 'response.output_text.done', text: 'Hello' });
    expect(run(s, ['Hel', 'lo'], final)).toEqual(events);
  });

  test('a forced call is held back and ends as a function_call item with its arguments', () => {
    const s = state({ tools: [weather], tool_choice: 'required' });
    const text = ['{"name":"get_weather",', '"arguments":{"city":"Oslo"}}'];
    const events = run(s, text, prediction({ output: text, metrics: { output_token_count: 9 } }));
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events[5].item).toEqual({
      type: 'function_call',
      id: 'fc_p1_0',
      status: 'completed',
      call_id: 'call_p1_0',
      name: 'get_weather',
      arguments: '{"city":"Oslo"}',
    });
  });

  test('an auto answer that is text after all streams from the moment it cannot be a call', () => {
    const s = state({ tools: [weather] });
    const events = run(s, [' ', 'Sunny', '.'], prediction({ output: [' ', 'Sunny', '.'], metrics: { output_token_count: 3 } }));
    expect(events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta)).toEqual([' Sunny', '.']);
    expect(events.at(-1)!.type).toBe('response.completed');
  });
});

describe('stream readers', () => {
  const s = state({ background: true });
  const final = prediction({ output: ['Wor', 'ld'], metrics: { output_token_count: 2 } });
  /** The log of a generation whose first attempt ('Hel', 'lo') a reset voided; the second made 'World'. */
  const log = [
    { output: 'Hel', voidedLater: true },
    { output: 'lo', voidedLater: true },
    { reset: true },
    { output: 'Wor' },
    { output: 'ld' },
  ];
  /**
   * A reader of the log after starting_after; `resetKnown`: it connected after the reset was written (the
   * first attempt's output reaches it marked void). Stops where it is told to read again.
   */
  const read = (startingAfter: number, resetKnown: boolean) => {
    const reader = new ResponseStreamReader(new ResponseEvents('p1', responsePlan(s)), startingAfter);
    const sent: NumberedEvent[] = reader.start(responseObject(s, final, 'queued'), responseObject(s, final, 'in_progress'));
    for (const entry of log) {
      if ('reset' in entry) {
        const restart = reader.reset();
        if (restart) return { sent, restart };
      } else sent.push(...reader.output(entry.output, resetKnown && entry.voidedLater === true));
    }
    sent.push(...reader.end(final, responseObject(s, final)));
    return { sent, restart: undefined };
  };
  const text = (events: NumberedEvent[]) => events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');
  const numbers = (events: NumberedEvent[]) => events.map((e) => e.sequence_number);

  test('a reader that comes after the reset gets one whole answer, numbered as the live reader numbered it', () => {
    const replay = read(-1, true);
    expect(replay.restart).toBeUndefined();
    expect(text(replay.sent)).toBe('World');
    const seqs = numbers(replay.sent);
    expect(seqs.every((n, i) => i === 0 || n > seqs[i - 1])).toBe(true);
    // The voided attempt's four events (item, part, two deltas) keep their numbers: the second attempt's start after them.
    expect(seqs.slice(0, 3)).toEqual([0, 1, 6]);
    expect(replay.sent.filter((e) => e.type === 'response.output_item.added')).toHaveLength(1);
    expect(replay.sent.at(-1)!.type).toBe('response.completed');
  });

  test('a reader that holds some of the voided attempt is told where to read again, and that read completes it exactly', () => {
    const live = read(-1, false);
    expect(text(live.sent)).toBe('Hello');
    expect(live.restart).toEqual({ startingAfter: 1 });
    const again = read(live.restart!.startingAfter, true);
    const transcript = [...live.sent.filter((e) => e.sequence_number <= live.restart!.startingAfter), ...again.sent];
    expect(transcript).toEqual(read(-1, true).sent);
    // A reader that resumes inside the voided attempt after the reset was written is told the same, and sent nothing void.
    const inside = read(3, true);
    expect(inside).toEqual({ sent: [], restart: { startingAfter: 1 } });
  });

  test('a held-back call that a reset voids asks nothing of any reader', () => {
    const calling = state({ tools: [weather], tool_choice: 'required' });
    const reader = new ResponseStreamReader(new ResponseEvents('p1', responsePlan(calling)), -1);
    reader.start(responseObject(calling, final, 'queued'), responseObject(calling, final, 'in_progress'));
    expect(reader.output('{"name":"get_w', false)).toEqual([]);
    expect(reader.reset()).toBeUndefined();
  });
});

describe('item references', () => {
  const earlier = {
    inputItems: storedInputItems(
      [{ type: 'message', id: 'mine_1', role: 'user', content: 'Weather in Oslo?' }],
      'aaaaaaaaaaaaaaaaaaaaaaaaaa',
    ),
    outputItems: outputItems(prediction({ id: 'aaaaaaaaaaaaaaaaaaaaaaaaaa', output: ['Sunny.'] }), responsePlan(state({}))),
  };
  const other = outputItems(prediction({ id: 'bbbbbbbbbbbbbbbbbbbbbbbbbb', output: ['Rain.'] }), responsePlan(state({})));
  const lookups: string[] = [];
  const itemsOf = async (responseId: string) => {
    lookups.push(responseId);
    return responseId === 'resp_bbbbbbbbbbbbbbbbbbbbbbbbbb' ? other : undefined;
  };

  test('a reference becomes the item it names: from the chain by any id, from any stored response by the id Kiln gave it', async () => {
    const input = createResponseBody.parse({
      model: 'a/b',
      input: [
        { type: 'item_reference', id: 'mine_1' },
        { type: 'item_reference', id: 'msg_aaaaaaaaaaaaaaaaaaaaaaaaaa' },
        { type: 'item_reference', id: 'msg_bbbbbbbbbbbbbbbbbbbbbbbbbb' },
        { role: 'user', content: 'And now?' },
      ],
    }).input;
    const resolved = await resolveItemReferences(input, [earlier], itemsOf);
    expect(resolved).toEqual([
      { type: 'message', id: 'mine_1', status: undefined, role: 'user', content: 'Weather in Oslo?' },
      { type: 'message', id: 'msg_aaaaaaaaaaaaaaaaaaaaaaaaaa', status: 'completed', role: 'assistant', content: 'Sunny.' },
      { type: 'message', id: 'msg_bbbbbbbbbbbbbbbbbbbbbbbbbb', status: 'completed', role: 'assistant', content: 'Rain.' },
      { type: 'message', role: 'user', content: 'And now?' },
    ]);
    // The chain's items are at hand: only the other response was read.
    expect(lookups).toEqual(['resp_bbbbbbbbbbbbbbbbbbbbbbbbbb']);
    expect(storedInputItems(resolved as Exclude<typeof resolved, string>, 'p2').map((i) => i.id)).toEqual([
      'mine_1',
      'msg_aaaaaaaaaaaaaaaaaaaaaaaaaa',
      'msg_bbbbbbbbbbbbbbbbbbbbbbbbbb',
      'msg_p2_in3',
    ]);
  });

  test('a reference that names nothing (unknown, or another account’s) is a 400 naming its place', async () => {
    for (const id of ['x', 'msg_cccccccccccccccccccccccccc', 'chosen']) {
      const { input } = createResponseBody.parse({
        model: 'a/b',
        input: [
          { role: 'user', content: 'hi' },
          { type: 'item_reference', id },
        ],
      });
      await expect(resolveItemReferences(input, [], itemsOf)).rejects.toMatchObject({ status: 400, extra: { openai_param: 'input.1.id' } });
    }
  });
});
