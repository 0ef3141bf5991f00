/**
 * Errors the API answers with, in Replicate's shape `{ detail, status }`. Anything else that
 * reaches the error handler is logged and answered with a plain 500: never a stack trace.
 */
import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { z } from 'zod';
import type { Logger } from '../lib/logger';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    detail: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
  }
}

/** 429: a rate limit or a cap. `Retry-After` says when trying again makes sense. */
export class TooManyRequestsError extends ApiError {
  constructor(detail: string, retryAfterSeconds: number, headers: Record<string, string> = {}) {
    super(429, 'Too many requests', detail, {}, { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))), ...headers });
  }
}

export class BadRequestError extends ApiError {
  constructor(detail: string) {
    super(400, 'Bad request', detail);
  }
}

export class UnauthorizedError extends ApiError {
  constructor(detail = 'You did not pass a valid authentication token') {
    super(401, 'Unauthenticated', detail);
  }
}

export class NotFoundError extends ApiError {
  constructor(detail = 'Not found') {
    super(404, 'Not found', detail);
  }
}

export interface InvalidField {
  field: string;
  description: string;
}

/** 422: the request was well formed but a field is wrong; each wrong field is named. */
export class ValidationError extends ApiError {
  constructor(readonly fields: InvalidField[]) {
    super(422, 'Input validation failed', fields.map((f) => `${f.field}: ${f.description}`).join('; '), {
      invalid_fields: fields.map((f) => ({ type: 'invalid', ...f })),
    });
  }

  static fromZod(error: z.ZodError, prefix?: string): ValidationError {
    return new ValidationError(
      error.issues.flatMap((issue) => {
        // Unknown keys are reported on the parent: name each one.
        const keys = issue.code === 'unrecognized_keys' ? issue.keys : [undefined];
        return keys.map((key) => {
          const path = [prefix, ...issue.path.map(String), key].filter((p) => p !== undefined && p !== '');
          return {
            field: path.join('.') || '(body)',
            description: issue.code === 'unrecognized_keys' ? 'is not a known field' : issue.message,
          };
        });
      }),
    );
  }
}

export const notFoundHandler: RequestHandler = (req, _res, next) => {
  next(new NotFoundError(`No route for ${req.method} ${req.path}`));
};

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    let e: ApiError;
    if (err instanceof ApiError) e = err;
    else if (err?.type === 'entity.parse.failed') e = new BadRequestError('Malformed JSON in request body');
    else if (err?.type === 'entity.too.large') e = new ApiError(413, 'Payload too large', 'Request body is too large');
    else if (typeof err?.status === 'number' && err.status >= 400 && err.status < 500 && err.expose) {
      e = new ApiError(err.status, 'Bad request', String(err.message));
    } else {
      logger.error({ err, method: req.method, path: req.path }, 'unhandled error');
      e = new ApiError(500, 'Internal server error', 'Internal server error');
    }
    if (res.headersSent) return;
    res.set(e.headers);
    res.status(e.status).json({ title: e.title, detail: e.message, status: e.status, ...e.extra });
  };
}
