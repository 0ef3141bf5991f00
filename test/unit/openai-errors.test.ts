/** Errors on /openai/v1 in OpenAI's shape, with the status, type, param and code clients act on. */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express, { type Request, type Response } from 'express';
import pino from 'pino';
import { errorHandler, NotFoundError, requestError, TooManyRequestsError, UnauthorizedError, ValidationError } from '../../api/errors';
import { errorCode, errorType, inputFailureError, openAiErrors } from '../../api/openai/errors';
import { openaiRoutes } from '../../api/openai/router';
import type { Db } from '../../db/client';

const logged: unknown[] = [];
const logger = pino({ level: 'error' }, { write: (line: string) => void logged.push(JSON.parse(line)) });

function answer(err: unknown) {
  const out: { status?: number; headers: Record<string, string>; body?: unknown; next?: unknown } = { headers: {} };
  const res = {
    headersSent: false,
    status(s: number) {
      out.status = s;
      return res;
    },
    json(b: unknown) {
      out.body = b;
      return res;
    },
    set(h: Record<string, string>) {
      Object.assign(out.headers, h);
      return res;
    },
    locals: {},
    getHeader: () => undefined,
  };
  const req = { method: 'POST', path: '/chat/completions', url: '/openai/v1/chat/completions' };
  openAiErrors(logger)(err, req as unknown as Request, res as unknown as Response, (e?: unknown) => void (out.next = e));
  return out;
}

test("a field that is wrong is OpenAI's 400, naming the field without Replicate's input. prefix", () => {
  const out = answer(new ValidationError([{ field: 'input.messages', description: 'is too short' }]));
  expect(out).toEqual({
    status: 400,
    headers: {},
    body: { error: { message: 'input.messages: is too short', type: 'invalid_request_error', param: 'messages', code: null } },
  });
});

test('a missing model is a 404 with code model_not_found; another 404 has no code', () => {
  expect(answer(new NotFoundError("The model 'a/b' does not exist")).body).toMatchObject({
    error: { type: 'not_found_error', code: 'model_not_found' },
  });
  expect(answer(new NotFoundError('No route for GET /x')).body).toMatchObject({ error: { type: 'not_found_error', code: null } });
});

test('a rate limit keeps its Retry-After header', () => {
  const out = answer(new TooManyRequestsError('slow down', 2.5));
  expect(out.status).toBe(429);
  expect(out.headers['Retry-After']).toBe('3');
  expect(out.body).toEqual({ error: { message: 'slow down', type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded' } });
});

test('a malformed body names the body', () => {
  const out = answer({ type: 'entity.parse.failed', message: 'Unexpected token' });
  expect(out.status).toBe(400);
  expect(out.body).toMatchObject({ error: { type: 'invalid_request_error', param: 'body' } });
});

test('a prompt too long for the context is a 400 with context_length_exceeded', () => {
  const err = inputFailureError({
    status: 'failed',
    error: 'Attempt 1 failed on node n: ContextLengthExceeded: input.prompt: 900 tokens, context 512',
  });
  expect(answer(err)).toEqual({
    status: 400,
    headers: {},
    body: {
      error: {
        message: "This model's maximum context length was exceeded: 900 tokens, context 512",
        type: 'invalid_request_error',
        param: 'prompt',
        code: 'context_length_exceeded',
      },
    },
  });
  // A text to embed: OpenAI calls the field `input`.
  const text = inputFailureError({
    status: 'failed',
    error: 'Attempt 1 failed on node n: ContextLengthExceeded: input.text: text 2 is 600 tokens, more than 512',
  });
  expect(answer(text).body).toMatchObject({ error: { param: 'input', code: 'context_length_exceeded' } });
  expect(inputFailureError({ status: 'failed', error: 'EngineFault: crashed' })).toBeUndefined();
  expect(inputFailureError({ status: 'succeeded', error: null })).toBeUndefined();
});

test('a schema the engine could not build a grammar from is a 400 naming the field, with no code', () => {
  const err = inputFailureError({
    status: 'failed',
    error:
      'Attempt 1 failed on node n: InvalidInput: input.json_schema: llama.cpp cannot build a grammar from this schema (Failed to parse grammar)',
  });
  expect(answer(err)).toEqual({
    status: 400,
    headers: {},
    body: {
      error: {
        message: 'json_schema: llama.cpp cannot build a grammar from this schema (Failed to parse grammar)',
        type: 'invalid_request_error',
        param: 'json_schema',
        code: null,
      },
    },
  });
});

test("an unknown error is logged and answered as OpenAI's 500, without its message", () => {
  logged.length = 0;
  const out = answer(new Error('boom at a secret place'));
  expect(out.next).toBeUndefined();
  expect(out).toEqual({
    status: 500,
    headers: {},
    body: { error: { message: 'Internal server error', type: 'server_error', param: null, code: null } },
  });
  expect(logged).toEqual([
    expect.objectContaining({ msg: 'unhandled error', err: expect.objectContaining({ message: 'boom at a secret place' }) }),
  ]);
});

test("a dependency restarting is OpenAI's 503 with Retry-After", () => {
  const out = answer(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
  expect(out.status).toBe(503);
  expect(out.headers['Retry-After']).toBe('2');
  expect(out.body).toMatchObject({ error: { type: 'server_error', code: null } });
});

test('the type follows the status', () => {
  expect([401, 404, 429, 500, 503, 400, 413].map(errorType)).toEqual([
    'authentication_error',
    'not_found_error',
    'rate_limit_error',
    'server_error',
    'server_error',
    'invalid_request_error',
    'invalid_request_error',
  ]);
  expect(errorCode(401, 'model')).toBeNull();
  expect(answer(new UnauthorizedError()).body).toMatchObject({ error: { type: 'authentication_error' } });
  expect(requestError(new UnauthorizedError())?.status).toBe(401);
});

test("through HTTP, a fault inside an OpenAI route is answered in OpenAI's shape, not Replicate's", async () => {
  // A database that fails every call: the route's first query (the token's account) throws.
  const fail = () => {
    throw new Error('the database fell over');
  };
  const db = new Proxy({}, { get: () => fail }) as unknown as Db;
  const app = express();
  app.use(
    '/openai/v1',
    openaiRoutes({
      db,
      logger,
      hub: {} as never,
      temporal: {} as never,
      connections: {} as never,
      controlQueue: 'q',
      allowPrivateWebhooks: false,
      defaultSequences: 4,
    }),
  );
  // The app's own handler behind it, as api/app.ts mounts it: it must not be what answers.
  app.use(errorHandler(logger));
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const { port } = server.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${port}/openai/v1/models`, { headers: { authorization: 'Bearer kiln_x' } });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: { message: 'Internal server error', type: 'server_error', param: null, code: null } });
  } finally {
    server.close();
  }
});
