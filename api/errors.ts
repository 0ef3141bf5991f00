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

/** 503: a dependency (Temporal, Postgres) is restarting; nothing was lost, try again shortly. */
export class ServiceUnavailableError extends ApiError {
  constructor(detail: string) {
    super(503, 'Service unavailable', detail, {}, { 'Retry-After': '2' });
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

// Postgres gone (restarting, failing over) or refusing connections, as postgres.js reports it.
const PG_UNAVAILABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'CONNECT_TIMEOUT', '57P01', '57P02', '57P03']);
// gRPC UNAVAILABLE and DEADLINE_EXCEEDED: Temporal is restarting or unreachable.
const GRPC_UNAVAILABLE = new Set([14, 4]);

/** Which dependency is down, if that is what `err` (or an error it wraps) says; else undefined. */
export function unavailableDependency(err: unknown): 'Temporal' | 'the database' | undefined {
  for (let e = err as { code?: unknown; cause?: unknown; name?: string } | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string' && PG_UNAVAILABLE.has(e.code)) return 'the database';
    if (typeof e.code === 'number' && GRPC_UNAVAILABLE.has(e.code) && (e.name === 'ServiceError' || 'details' in e || 'metadata' in e)) return 'Temporal';
    if (e.name === 'ServiceError' && /unavailable|deadline|connect/i.test(String((e as Error).message))) return 'Temporal';
  }
  return undefined;
}

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    let e: ApiError;
    const down = err instanceof ApiError ? undefined : unavailableDependency(err);
    if (err instanceof ApiError) e = err;
    else if (err?.type === 'entity.parse.failed') e = new BadRequestError('Malformed JSON in request body');
    else if (err?.type === 'entity.too.large') e = new ApiError(413, 'Payload too large', 'Request body is too large');
    else if (typeof err?.status === 'number' && err.status >= 400 && err.status < 500 && err.expose) {
      e = new ApiError(err.status, 'Bad request', String(err.message));
    } else if (down) {
      // A restart of Temporal or Postgres is not the client's fault and not a bug: say when to retry.
      logger.warn({ err: (err as Error).message, method: req.method, path: req.path }, `${down} unavailable`);
      e = new ServiceUnavailableError(`${down} is unavailable for a moment; retry the request (with the same Idempotency-Key for creates)`);
    } else {
      logger.error({ err, method: req.method, path: req.path }, 'unhandled error');
      e = new ApiError(500, 'Internal server error', 'Internal server error');
    }
    if (res.headersSent) return;
    res.set(e.headers);
    res.status(e.status).json({ title: e.title, detail: e.message, status: e.status, ...e.extra });
  };
}
