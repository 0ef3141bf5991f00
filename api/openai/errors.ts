/**
 * Errors on /openai/v1 in OpenAI's shape, `{ error: { message, type, param, code } }`, which the
 * `openai` clients read, instead of the Replicate shape of the rest of the API.
 */
import type { ErrorRequestHandler } from 'express';
import type { PredictionRow } from '../../db/predictions';
import { contextLengthFailure } from '../context-length';
import { ApiError, requestError, ValidationError } from '../errors';
import type { OpenAiErrorBody } from './protocol';

export function openAiError(message: string, type: string, param: string | null, code: string | null): OpenAiErrorBody {
  return { error: { message, type, param, code } };
}

/** OpenAI's 400 for a prompt (or a text to embed) longer than the context, or undefined for any other outcome. */
export function contextLengthError(row: Pick<PredictionRow, 'status' | 'error'>): ApiError | undefined {
  const failure = contextLengthFailure(row);
  if (!failure) return undefined;
  // The embeddings input's `text` is OpenAI's `input`.
  const param = failure.field === 'input.text' ? 'input' : failure.field.replace(/^input\./, '');
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

/** The body of an error that carries OpenAI's own code (`openai_code`), such as a context too short for the prompt. */
export function codedErrorBody(e: ApiError): OpenAiErrorBody {
  return openAiError(e.message, 'invalid_request_error', requestParam(e), e.extra.openai_code as string);
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
 * Every error of these routes in OpenAI's shape. A 422 of the request's fields is OpenAI's 400;
 * an error the API does not know (neither its own nor a malformed request's) goes on to the
 * app's handler, which logs it and answers a plain 500.
 */
export const openAiErrors: ErrorRequestHandler = (err, _req, res, next) => {
  if (res.headersSent) return next(err);
  if (err instanceof ValidationError)
    return void res.status(400).json(openAiError(err.message, errorType(400), validationParam(err), errorCode(400, err.message)));
  // Errors of the API's own (auth, rate limits) and of a malformed request (body, path).
  const e = requestError(err);
  if (!e) return next(err);
  res.set(e.headers);
  if (typeof e.extra.openai_code === 'string') return void res.status(e.status).json(codedErrorBody(e));
  res.status(e.status).json(openAiError(e.message, errorType(e.status), requestParam(e), errorCode(e.status, e.message)));
};
