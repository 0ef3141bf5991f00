/** OpenAI's streams: the chunks each event becomes, and the SSE bytes they go out as, `data: [DONE]` last. */
import { EventEmitter } from 'node:events';
import type { Response } from 'express';
import { awaitPrediction } from '../../api/await-prediction';
import { chatBody, completionBody, type Tool } from '../../api/openai/protocol';
import { chatPlan, chatStream } from '../../api/openai/serving-chat';
import { completionPlan, completionStream } from '../../api/openai/serving-completions';
import { ChunkStream, streamPrediction } from '../../api/openai/stream';
import { type Chunk, usageChunk } from '../../api/openai/stream-shape';
import { followPrediction } from '../../api/prediction-stream';

jest.mock('../../api/prediction-stream', () => ({ followPrediction: jest.fn() }));
jest.mock('../../api/await-prediction', () => ({ awaitPrediction: jest.fn() }));

const started = { id: 'p1', createdAt: new Date(1_700_000_000_000) };
const version = { version: { settings: {} } } as never;
const weather: Tool = { type: 'function', function: { name: 'get_weather' } };
const ask = [{ role: 'user', content: 'hi' }];
const chat = (extra: Record<string, unknown> = {}) =>
  chatStream(chatPlan(chatBody.parse({ model: 'a/b', messages: ask, ...extra }), version), started);
const deltas = (chunks: Chunk[]) => chunks.map((c) => c.choices[0]);

describe('chunks', () => {
  test('a chat stream opens with the role, then text deltas, then the finish reason', () => {
    const shape = chat({ max_tokens: 3 });
    expect(shape.first).toEqual({
      id: 'chatcmpl-p1',
      object: 'chat.completion.chunk',
      created: 1_700_000_000,
      model: 'a/b',
      choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null, logprobs: null }],
    });
    expect(deltas(shape.text('Hel'))).toEqual([{ index: 0, delta: { content: 'Hel' }, finish_reason: null, logprobs: null }]);
    expect(deltas(shape.end({ metrics: { output_token_count: 3 } }))).toEqual([
      { index: 0, delta: {}, finish_reason: 'length', logprobs: null },
    ]);
  });

  test('a completion stream has no opening chunk, and a text for every choice', () => {
    const shape = completionStream(completionPlan(completionBody.parse({ model: 'a/b', prompt: 'x' }), version), started);
    expect(shape.first).toBeUndefined();
    expect(shape.text('up')).toEqual([
      {
        id: 'cmpl-p1',
        object: 'text_completion',
        created: 1_700_000_000,
        model: 'a/b',
        choices: [{ index: 0, text: 'up', finish_reason: null, logprobs: null }],
      },
    ]);
    expect(deltas(shape.end({ metrics: {} }))).toEqual([{ index: 0, text: '', finish_reason: 'stop', logprobs: null }]);
  });

  test('auto tools: text that may be a call is held, and a call goes out as one tool_calls delta', () => {
    const shape = chat({ tools: [weather] });
    expect(shape.text(' {"name":"get_weather",')).toEqual([]);
    expect(shape.text('"arguments":{}}')).toEqual([]);
    const end = shape.end({ metrics: {} });
    expect(deltas(end)).toEqual([
      {
        index: 0,
        delta: { tool_calls: [{ index: 0, id: 'call_p1_0', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
        finish_reason: null,
        logprobs: null,
      },
      { index: 0, delta: {}, finish_reason: 'tool_calls', logprobs: null },
    ]);
  });

  test('auto tools: once the answer cannot be a call, the held text and the rest stream as text', () => {
    const shape = chat({ tools: [weather] });
    expect(shape.text('  ')).toEqual([]);
    expect(deltas(shape.text('Hi'))).toEqual([{ index: 0, delta: { content: '  Hi' }, finish_reason: null, logprobs: null }]);
    expect(deltas(shape.text('!'))).toEqual([{ index: 0, delta: { content: '!' }, finish_reason: null, logprobs: null }]);
    expect(deltas(shape.end({ metrics: {} }))).toEqual([{ index: 0, delta: {}, finish_reason: 'stop', logprobs: null }]);
  });

  test('forced tools: an answer that is not a call of a known tool comes out whole as text at the end', () => {
    const shape = chat({ tools: [weather], tool_choice: 'required' });
    expect(shape.text('Hello')).toEqual([]);
    expect(deltas(shape.end({ metrics: {} }))).toEqual([
      { index: 0, delta: { content: 'Hello' }, finish_reason: null, logprobs: null },
      { index: 0, delta: {}, finish_reason: 'stop', logprobs: null },
    ]);
  });

  test('a call cut off by max_tokens ends by length, and the unfinished JSON it held is not sent as text', () => {
    for (const tool_choice of ['required', 'auto']) {
      const shape = chat({ tools: [weather], tool_choice, max_tokens: 4 });
      expect(shape.text('{"name":"get')).toEqual([]);
      expect(deltas(shape.end({ metrics: { output_token_count: 4 } }))).toEqual([
        { index: 0, delta: {}, finish_reason: 'length', logprobs: null },
      ]);
    }
  });

  test('the usage chunk has no choices', () => {
    const usage = { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3, prompt_tokens_details: { cached_tokens: 0 } };
    expect(usageChunk(chat(), usage)).toEqual({
      id: 'chatcmpl-p1',
      object: 'chat.completion.chunk',
      created: 1_700_000_000,
      model: 'a/b',
      choices: [],
      usage,
    });
  });
});

/** An express response that records what is written. */
class FakeResponse extends EventEmitter {
  head?: { status: number; headers: Record<string, string> };
  written = '';
  ended = false;
  statusCode = 200;
  json?: unknown;
  writeHead(status: number, headers: Record<string, string>) {
    this.head = { status, headers };
    return this;
  }
  flushHeaders() {}
  write(s: string) {
    this.written += s;
    return true;
  }
  end() {
    this.ended = true;
  }
  get writableEnded() {
    return this.ended;
  }
  status(s: number) {
    this.statusCode = s;
    return this;
  }
  sendJson(body: unknown) {
    this.json = body;
  }
}
const fakeResponse = () => {
  const res = new FakeResponse();
  return { res, express: Object.assign(res, { json: (b: unknown) => res.sendJson(b) }) as unknown as Response };
};

describe('SSE', () => {
  test('nothing is sent until the first chunk; the opening chunk goes first; [DONE] ends it', () => {
    const { res, express } = fakeResponse();
    const first = chat().first!;
    const out = new ChunkStream(express, first);
    out.send([]);
    expect(res.head).toBeUndefined();
    expect(out.opened).toBe(false);
    out.send(chat().text('a'));
    expect(res.head?.status).toBe(200);
    expect(res.head?.headers['Content-Type']).toBe('text/event-stream; charset=utf-8');
    out.done();
    expect(res.written).toBe(`data: ${JSON.stringify(first)}\n\ndata: ${JSON.stringify(chat().text('a')[0])}\n\ndata: [DONE]\n\n`);
    expect(res.ended).toBe(true);
  });

  test('an error is a data line in OpenAI error shape', () => {
    const { res, express } = fakeResponse();
    const out = new ChunkStream(express);
    out.error('engine died');
    out.done();
    expect(res.written).toBe(
      'data: {"error":{"message":"engine died","type":"server_error","param":null,"code":null}}\n\ndata: [DONE]\n\n',
    );
  });
});

describe('relaying a prediction', () => {
  type OnEvent = (e: { event: string; data: string }) => void;
  let onEvent: OnEvent;
  let onEnd: () => Promise<void>;
  const stop = jest.fn();
  beforeEach(() => {
    stop.mockReset();
    jest.mocked(awaitPrediction).mockReset();
    jest.mocked(followPrediction).mockImplementation((_deps, _id, _after, ev, end) => {
      onEvent = ev as unknown as OnEvent;
      onEnd = end as () => Promise<void>;
      return stop;
    });
  });
  const row = { id: 'p1', createdAt: started.createdAt } as never;
  const done = (status: string, extra: Record<string, unknown> = {}) =>
    jest
      .mocked(awaitPrediction)
      .mockResolvedValue({ ...started, status, metrics: { input_token_count: 2, output_token_count: 1 }, ...extra } as never);
  const lines = (written: string) => written.split('\n\n').filter(Boolean);
  /** A hold on the connection, withdrawn when its controller aborts. */
  const held = (control = new AbortController()) => ({
    signal: control.signal,
    throwIfWithdrawn: () => control.signal.throwIfAborted(),
  });

  test('output, finish, usage, [DONE]', async () => {
    const { res, express } = fakeResponse();
    streamPrediction(
      {} as never,
      express,
      row,
      completionStream(completionPlan(completionBody.parse({ model: 'a/b', prompt: 'x', max_tokens: 1 }), version), started),
      true,
      held(),
    );
    onEvent({ event: 'output', data: 'up' });
    done('succeeded');
    await onEnd();
    const sent = lines(res.written);
    expect(sent).toHaveLength(4);
    expect(JSON.parse(sent[0].slice(6)).choices[0]).toMatchObject({ text: 'up', finish_reason: null });
    expect(JSON.parse(sent[1].slice(6)).choices[0]).toMatchObject({ text: '', finish_reason: 'length' });
    expect(JSON.parse(sent[2].slice(6))).toMatchObject({ choices: [], usage: { total_tokens: 3 } });
    expect(sent[3]).toBe('data: [DONE]');
  });

  test('a prompt too long for the context, before any output, is an HTTP 400 and no stream', async () => {
    const { res, express } = fakeResponse();
    streamPrediction({} as never, express, row, chat(), false, held());
    done('failed', { error: 'Attempt 1 failed on node n: ContextLengthExceeded: input.messages: 300 tokens do not fit 256' });
    await onEnd();
    expect(res.head).toBeUndefined();
    expect(res.statusCode).toBe(400);
    expect(res.json).toEqual({
      error: {
        message: "This model's maximum context length was exceeded: 300 tokens do not fit 256",
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    });
  });

  test('a failed prediction ends the stream with its error and [DONE], no finish chunk', async () => {
    const { res, express } = fakeResponse();
    streamPrediction({} as never, express, row, chat(), true, held());
    onEvent({ event: 'error', data: 'out of memory' });
    done('failed', { error: 'out of memory' });
    await onEnd();
    const sent = lines(res.written);
    expect(sent.slice(1)).toEqual([
      'data: {"error":{"message":"out of memory","type":"server_error","param":null,"code":null}}',
      'data: [DONE]',
    ]);
  });

  test('a restarted generation voids the stream: an error, [DONE], and nothing after', async () => {
    const { res, express } = fakeResponse();
    streamPrediction({} as never, express, row, chat(), false, held());
    onEvent({ event: 'output', data: 'a' });
    onEvent({ event: 'reset', data: '' });
    onEvent({ event: 'output', data: 'b' });
    expect(stop).toHaveBeenCalled();
    await onEnd();
    const sent = lines(res.written);
    expect(sent).toHaveLength(4);
    expect(sent[2]).toContain('the generation restarted after a node failure');
    expect(sent[3]).toBe('data: [DONE]');
    expect(awaitPrediction).not.toHaveBeenCalled();
  });

  test('a revoked token ends the stream with an authentication error and [DONE], and nothing after', async () => {
    const { res, express } = fakeResponse();
    const control = new AbortController();
    streamPrediction({} as never, express, row, chat(), false, held(control));
    onEvent({ event: 'output', data: 'a' });
    control.abort(new Error('The token this connection was opened with has been revoked'));
    expect(stop).toHaveBeenCalled();
    onEvent({ event: 'output', data: 'b' });
    await onEnd();
    const sent = lines(res.written);
    expect(sent.slice(2)).toEqual([
      'data: {"error":{"message":"The token this connection was opened with has been revoked","type":"authentication_error","param":null,"code":null}}',
      'data: [DONE]',
    ]);
    expect(awaitPrediction).not.toHaveBeenCalled();
  });

  test('withdrawn before the first chunk, the answer is an HTTP 401 in OpenAI’s shape', async () => {
    const { res, express } = fakeResponse();
    const control = new AbortController();
    streamPrediction({} as never, express, row, chat(), false, held(control));
    control.abort(new Error('The account this connection belongs to has been disabled'));
    await onEnd();
    expect(res.head).toBeUndefined();
    expect(res.statusCode).toBe(401);
    expect(res.json).toEqual({
      error: { message: 'The account this connection belongs to has been disabled', type: 'authentication_error', param: null, code: null },
    });
  });

  test('a client that left gets nothing more', async () => {
    const { res, express } = fakeResponse();
    streamPrediction({} as never, express, row, chat(), false, held());
    res.emit('close');
    expect(stop).toHaveBeenCalled();
    await onEnd();
    expect(res.written).toBe('');
    expect(res.ended).toBe(false);
  });
});
