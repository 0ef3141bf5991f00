/**
 * One OpenTelemetry span per API request, active while the request runs, so the Temporal client
 * calls it makes (starting a prediction's workflow) continue its trace. Without a tracer provider
 * (OTEL_EXPORTER_OTLP_ENDPOINT unset) the spans are no-ops.
 */
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { RequestHandler, Response } from 'express';
import { tracer } from '../lib/tracing';

export const requestTrace: RequestHandler = (req, res, next) => {
  tracer().startActiveSpan(`${req.method} ${req.path}`, { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method } }, (span) => {
    res.on('finish', () => {
      // The route's pattern names the span (an id in the name would make one name per prediction).
      if (req.route?.path) span.updateName(`${req.method} ${req.baseUrl}${req.route.path}`);
      span.setAttribute('http.response.status_code', res.statusCode);
      const predictionId = (res as Response).locals.predictionId ?? res.getHeader('x-kiln-prediction-id');
      if (predictionId) span.setAttribute('kiln.prediction_id', String(predictionId));
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    next();
  });
};
