/**
 * One log line per request (pino-http), carrying the prediction it was about, so a prediction's
 * story can be followed from the API through both workers by its id. Only method and path are
 * logged: query strings hold signatures (stream and file URLs) and headers hold tokens.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Response } from 'express';
import { pinoHttp } from 'pino-http';
import type { Logger } from '../lib/logger';

const PREDICTION_PATH = /^\/v1\/predictions\/([a-z2-7]{26})(?:\/|$)/;

/** Routes that create a prediction say which one; reads name it in their path. */
export function notePrediction(res: Response, id: string): void {
  res.locals.predictionId = id;
}

function predictionIdOf(req: IncomingMessage, res: ServerResponse): string | undefined {
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
    serializers: {
      req: (req: { method: string; url: string }) => ({ method: req.method, path: req.url.split('?')[0] }),
      res: (res: { statusCode: number }) => ({ status: res.statusCode }),
    },
    customLogLevel: (_req, res, err) => (err || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'warn' : 'info'),
    customProps: (req, res) => {
      const predictionId = predictionIdOf(req, res);
      return predictionId ? { predictionId } : {};
    },
  });
}
