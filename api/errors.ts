/**
 * Errors the API answers with, in Replicate's shape `{ detail, status }`. Anything else that
 * reaches the error handler is logged and answered with a plain 500: never a stack trace.
 */
import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import type { z } from 'zod';
import { KilnError } from '../lib/kiln-error';
import type { Logger } from '../lib/logger';
import { predictionIdOf, redactCodecPath } from './request-log';

export class ApiError extends KilnError {
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
const PG_UNAVAILABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  '57P01',
  '57P02',
  '57P03',
]);
// gRPC UNAVAILABLE and DEADLINE_EXCEEDED: Temporal is restarting or unreachable.
const GRPC_UNAVAILABLE = new Set([14, 4]);

/** Which dependency is down, if that is what `err` (or an error it wraps) says; else undefined. */
export function unavailableDependency(err: unknown): 'Temporal' | 'the database' | undefined {
  for (
    let e = err as { code?: unknown; cause?: unknown; name?: string } | undefined, depth = 0;
    e && depth < 5;
    e = e.cause as typeof e, depth++
  ) {
    if (typeof e.code === 'string' && PG_UNAVAILABLE.has(e.code)) return 'the database';
    if (typeof e.code === 'number' && GRPC_UNAVAILABLE.has(e.code) && (e.name === 'ServiceError' || 'details' in e || 'metadata' in e))
      return 'Temporal';
    if (e.name === 'ServiceError' && /unavailable|deadline|connect/i.test(String((e as Error).message))) return 'Temporal';
  }
  return undefined;
}

/**
 * The ApiError for what express, its router and body parser throw about a malformed request
 * (a body that is not JSON or too big, a path that does not decode), or undefined if `err` is
 * not about the request.
 */
export function requestError(err: unknown): ApiError | undefined {
  if (err instanceof ApiError) return err;
  const e = err as
    | { type?: string; status?: number; expose?: boolean; message?: string; limit?: number; charset?: string; encoding?: string }
    | undefined;
  if (!e || typeof e !== 'object') return undefined;
  const field = (status: number, title: string, name: string, description: string) =>
    new ApiError(status, title, `${name}: ${description}`, { invalid_fields: [{ type: 'invalid', field: name, description }] });
  if (e.type === 'entity.parse.failed') return field(400, 'Bad request', 'body', `is not valid JSON (${e.message})`);
  if (e.type === 'entity.too.large') {
    return field(
      413,
      'Payload too large',
      'body',
      `is larger than the ${e.limit} byte limit (${((e.limit ?? 0) / 2 ** 20).toFixed(0)} MiB): upload large inputs with POST /v1/files and pass the file's URL`,
    );
  }
  if (e.type === 'charset.unsupported')
    return field(415, 'Unsupported media type', 'Content-Type', `charset ${e.charset} is not supported: send UTF-8`);
  if (e.type === 'encoding.unsupported') return field(415, 'Unsupported media type', 'Content-Encoding', `${e.encoding} is not supported`);
  // The router's own decoding of a path parameter (rejectMalformedPath usually answers first).
  if (err instanceof URIError) return field(400, 'Bad request', 'path', 'is not valid percent-encoded UTF-8');
  if (typeof e.status === 'number' && e.status >= 400 && e.status < 500 && e.expose)
    return new ApiError(e.status, 'Bad request', String(e.message));
  return undefined;
}

const PREDICTION_OF_ERROR = Symbol('kiln.predictionId');

/**
 * Marks `err` as having happened while handling prediction `id`, so the 500 it may become is
 * logged with the id (a create fails before its route could note the prediction on the response).
 */
export function aboutPrediction(err: unknown, id: string): unknown {
  if (err && typeof err === 'object' && !(PREDICTION_OF_ERROR in err)) {
    Object.defineProperty(err, PREDICTION_OF_ERROR, { value: id, enumerable: false });
  }
  return err;
}

/**
 * The answer to any error a route raised: its own ApiError, a malformed request's, a 503 while a
 * dependency restarts, or a plain 500 logged with the request and prediction ids (the client gets
 * none of the original). Each error shape (Replicate's here, OpenAI's on /openai/v1) writes it.
 */
export function answerOf(err: unknown, req: Request, res: Response, logger: Logger): ApiError {
  const known = requestError(err);
  if (known) return known;
  const down = unavailableDependency(err);
  if (down) {
    // A restart of Temporal or Postgres is not the client's fault and not a bug: say when to retry.
    logger.warn({ err: (err as Error).message, method: req.method, path: redactCodecPath(req.path) }, `${down} unavailable`);
    return new ServiceUnavailableError(
      `${down} is unavailable for a moment; retry the request (with the same Idempotency-Key for creates)`,
    );
  }
  const log = (req as { log?: Logger }).log ?? logger;
  const predictionId = (err as { [PREDICTION_OF_ERROR]?: string } | undefined)?.[PREDICTION_OF_ERROR] ?? predictionIdOf(req, res);
  log.error({ err, method: req.method, path: redactCodecPath(req.path), ...(predictionId ? { predictionId } : {}) }, 'unhandled error');
  return new ApiError(500, 'Internal server error', 'Internal server error');
}

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const e = answerOf(err, req, res, logger);
    if (res.headersSent) return;
    res.set(e.headers);
    res.status(e.status).json({ title: e.title, detail: e.message, status: e.status, ...e.extra });
  };
}
