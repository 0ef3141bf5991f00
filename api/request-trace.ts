/**
 * One OpenTelemetry span per API request, active while the request runs, so the Temporal client
 * calls it makes (starting a prediction's workflow) continue its trace. Without a tracer provider
 * (OTEL_EXPORTER_OTLP_ENDPOINT unset) the spans are no-ops.
 */
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { RequestHandler } from 'express';
import { tracer } from '../lib/tracing';
import { predictionIdOf } from './request-log';

export const requestTrace: RequestHandler = (req, res, next) => {
  // Named by the method until a route matches: a raw path may hold a secret (the codec server's token).
  tracer().startActiveSpan(req.method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method } }, (span) => {
    // 'close' comes after 'finish', and also when the client goes first (an SSE stream, a Prefer: wait).
    res.once('close', () => {
      // The route's pattern names the span (an id in the name would make one name per prediction).
      if (req.route?.path) span.updateName(`${req.method} ${req.baseUrl}${req.route.path}`);
      span.setAttribute('http.response.status_code', res.statusCode);
      const predictionId = predictionIdOf(req, res);
      if (predictionId) span.setAttribute('kiln.prediction_id', predictionId);
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    next();
  });
};
