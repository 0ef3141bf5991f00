/** Errors on /openai/v1 in OpenAI's shape, with the status, type, param and code clients act on. */
import type { Response } from 'express';
import { NotFoundError, TooManyRequestsError, UnauthorizedError, ValidationError, requestError } from '../../api/errors';
import { contextLengthError, errorCode, errorType, openAiErrors } from '../../api/openai/errors';

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
  };
  openAiErrors(err, {} as never, res as unknown as Response, (e?: unknown) => void (out.next = e));
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
  const err = contextLengthError({
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
  const text = contextLengthError({
    status: 'failed',
    error: 'Attempt 1 failed on node n: ContextLengthExceeded: input.text: text 2 is 600 tokens, more than 512',
  });
  expect(answer(text).body).toMatchObject({ error: { param: 'input', code: 'context_length_exceeded' } });
  expect(contextLengthError({ status: 'failed', error: 'EngineFault: crashed' })).toBeUndefined();
  expect(contextLengthError({ status: 'succeeded', error: null })).toBeUndefined();
});

test('an unknown error goes on to the app handler, unanswered', () => {
  const boom = new Error('boom');
  const out = answer(boom);
  expect(out.next).toBe(boom);
  expect(out.status).toBeUndefined();
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
