/**
 * OpenTelemetry traces, exported over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set (the
 * exporter reads the OTEL_* settings itself). Temporal's OpenTelemetry plugin carries the trace
 * from the API's client call through the workflow (spans exported by a sink, so replay and
 * determinism are untouched) to each activity, the engine's included: one trace per request.
 */
import { trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { OpenTelemetryPlugin } from '@temporalio/interceptors-opentelemetry';

export interface Tracing {
  /** For the Temporal Client and Worker options (`plugins`). */
  plugin: OpenTelemetryPlugin;
  /** Sends what is buffered and stops. */
  shutdown: () => Promise<void>;
}

/** Tracing for this process, or undefined where no endpoint is set (and no exporter is given). */
export function startTracing(service: string, endpoint: string | undefined, exporter?: SpanExporter): Tracing | undefined {
  if (!endpoint && !exporter) return undefined;
  const resource = new Resource({ 'service.name': service });
  const spanProcessor = new BatchSpanProcessor(exporter ?? new OTLPTraceExporter());
  const provider = new NodeTracerProvider({ resource, spanProcessors: [spanProcessor] });
  provider.register();
  return { plugin: new OpenTelemetryPlugin({ resource, spanProcessor }), shutdown: () => provider.shutdown() };
}

export const tracer = () => trace.getTracer('kiln');
