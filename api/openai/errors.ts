/**
 * Errors on /openai/v1 in OpenAI's shape, `{ error: { message, type, param, code } }`, which the
 * `openai` clients read, instead of the Replicate shape of the rest of the API.
 */
import type { ErrorRequestHandler } from 'express';
import type { PredictionRow } from '../../db/predictions';
import type { Logger } from '../../lib/logger';
import { ApiError, answerOf, ValidationError } from '../errors';
import { inputFailure } from '../input-failure';
import type { OpenAiErrorBody } from './protocol';

export function openAiError(message: string, type: string, param: string | null, code: string | null): OpenAiErrorBody {
  return { error: { message, type, param, code } };
}

/**
 * OpenAI's 400 for a prediction that failed on its input: a prompt (or a text to embed) longer
 * than the context, with code context_length_exceeded, or an input the engine refused (a schema
 * with no grammar); undefined for any other outcome.
 */
export function inputFailureError(row: Pick<PredictionRow, 'status' | 'error'>): ApiError | undefined {
  const failure = inputFailure(row);
  if (!failure) return undefined;
  // The embeddings input's `text` is OpenAI's `input`.
  const param = failure.field === 'input.text' ? 'input' : failure.field.replace(/^input\./, '');
  if (failure.type === 'InvalidInput')
    return new ApiError(400, 'Bad request', `${param}: ${failure.description}`, { openai_code: null, openai_param: param });
  return new ApiError(400, 'Bad request', `This model's maximum context length was exceeded: ${failure.description}`, {
    openai_code: 'context_length_exceeded',
    openai_param: param,
  });
}

/** The field an API error or a malformed request names: OpenAI's own param, else the first invalid field. */
function requestParam(e: ApiError): string | null {
  return (
    (e.extra.openai_param as string | undefined) ?? (e.extra.invalid_fields as Array<{ field: string }> | undefined)?.[0]?.field ?? null
  );
}

/** The body of an error that carries OpenAI's own code (`openai_code`, null for none), such as a context too short for the prompt. */
export function codedErrorBody(e: ApiError): OpenAiErrorBody {
  return openAiError(e.message, 'invalid_request_error', requestParam(e), (e.extra.openai_code as string | null | undefined) ?? null);
}

/** OpenAI's error type for an HTTP status. */
export function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/** OpenAI's error code where a client acts on it: a missing model, a rate limit. */
export function errorCode(status: number, message: string): string | null {
  if (status === 404 && /model/i.test(message)) return 'model_not_found';
  if (status === 429) return 'rate_limit_exceeded';
  return null;
}

/** The field a 422 names, without the `input.` prefix of Replicate's field paths. */
function validationParam(err: ValidationError): string | null {
  return err.fields[0]?.field.replace(/^input\./, '') ?? null;
}

/**
 * Every error of these routes in OpenAI's shape, whatever its status: a 422 of the request's
 * fields is OpenAI's 400, and an error the API does not know is logged and answered as OpenAI's
 * 500 (a 503 while a dependency restarts), so that OpenAI's clients read every answer.
 */
export function openAiErrors(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    if (err instanceof ValidationError && !res.headersSent)
      return void res.status(400).json(openAiError(err.message, errorType(400), validationParam(err), errorCode(400, err.message)));
    const e = answerOf(err, req, res, logger);
    if (res.headersSent) return;
    res.set(e.headers);
    if ('openai_code' in e.extra) return void res.status(e.status).json(codedErrorBody(e));
    res.status(e.status).json(openAiError(e.message, errorType(e.status), requestParam(e), errorCode(e.status, e.message)));
  };
}
