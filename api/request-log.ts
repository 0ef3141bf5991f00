/**
 * One log line per request (pino-http), carrying the prediction it was about, so a prediction's
 * story can be followed from the API through both workers by its id. Only method and path are
 * logged: query strings hold signatures (stream and file URLs) and headers hold tokens.
 * Each request has an id (the client's X-Request-Id when it is a plain token, else a new UUID),
 * answered in X-Request-Id and on every line logged about the request, errors included.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Response } from 'express';
import { pinoHttp } from 'pino-http';
import type { Logger } from '../lib/logger';

const PREDICTION_PATH = /^\/v1\/predictions\/([a-z2-7]{26})(?:\/|$)/;

/** Routes that create a prediction say which one; reads name it in their path. */
export function notePrediction(res: Response, id: string): void {
  res.locals.predictionId = id;
}

/** The codec server's token-in-path endpoint (api/codec-server.ts): `/codec/<token>/decode` is logged as `/codec/[redacted]/decode`. */
export function redactCodecPath(path: string): string {
  return path.replace(/^\/codec\/[^/]+\/(decode|encode)\/?$/, '/codec/[redacted]/$1');
}

const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The request's id: a well-formed X-Request-Id from the client (a proxy's), else a new one. */
function requestIdOf(req: IncomingMessage, res: ServerResponse): string {
  const given = req.headers['x-request-id'];
  const id = typeof given === 'string' && CLIENT_REQUEST_ID.test(given) ? given : randomUUID();
  res.setHeader('X-Request-Id', id);
  return id;
}

export function predictionIdOf(req: IncomingMessage, res: ServerResponse): string | undefined {
  const locals = (res as unknown as Response).locals;
  const fromRoute = locals?.predictionId as string | undefined;
  const fromHeader = res.getHeader('x-kiln-prediction-id');
  const fromPath = PREDICTION_PATH.exec(((req as { originalUrl?: string }).originalUrl ?? req.url ?? '').split('?')[0])?.[1];
  return fromRoute ?? (typeof fromHeader === 'string' ? fromHeader : undefined) ?? fromPath;
}

export function requestLog(logger: Logger) {
  return pinoHttp({
    logger,
    autoLogging: { ignore: (req) => req.url === '/metrics' || req.url === '/healthz' },
    quietReqLogger: true,
    genReqId: requestIdOf,
    customAttributeKeys: { reqId: 'requestId' },
    serializers: {
      req: (req: { method: string; url: string }) => ({ method: req.method, path: redactCodecPath(req.url.split('?')[0]) }),
      res: (res: { statusCode: number }) => ({ status: res.statusCode }),
    },
    customLogLevel: (_req, res, err) => (err || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'warn' : 'info'),
    customProps: (req, res) => {
      const predictionId = predictionIdOf(req, res);
      return predictionId ? { predictionId } : {};
    },
  });
}
