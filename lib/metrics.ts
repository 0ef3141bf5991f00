/**
 * Prometheus metrics. Each process keeps its own registry and serves it at /metrics (the API on
 * its port, the workers on KILN_METRICS_PORT); Prometheus scrapes them all.
 */
import http from 'node:http';
import client from 'prom-client';

export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry, prefix: 'kiln_' });

const seconds = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

export const predictionsTotal = new client.Counter({
  name: 'kiln_predictions_total',
  help: 'Predictions that reached a terminal status',
  labelNames: ['model', 'status'] as const,
  registers: [registry],
});
export const queueSeconds = new client.Histogram({
  name: 'kiln_prediction_queue_seconds',
  help: "Time a prediction waited in its model's fair queue",
  labelNames: ['model'] as const,
  buckets: seconds,
  registers: [registry],
});
export const setupSeconds = new client.Histogram({
  name: 'kiln_prediction_setup_seconds',
  help: 'Cold start: download and load before a prediction',
  labelNames: ['model'] as const,
  buckets: seconds,
  registers: [registry],
});
export const coldStarts = new client.Counter({
  name: 'kiln_cold_starts_total',
  help: 'Predictions that had to load their model first',
  labelNames: ['model'] as const,
  registers: [registry],
});
export const predictSeconds = new client.Histogram({
  name: 'kiln_prediction_predict_seconds',
  help: 'Time the engine spent on a prediction',
  labelNames: ['model'] as const,
  buckets: seconds,
  registers: [registry],
});
export const tokensPerSecond = new client.Histogram({
  name: 'kiln_prediction_tokens_per_second',
  help: 'Generation speed of language model predictions',
  labelNames: ['model'] as const,
  buckets: [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000],
  registers: [registry],
});
export const draftTokens = new client.Counter({
  name: 'kiln_draft_tokens_total',
  help: 'Tokens a draft model (or input lookup) predicted, by whether the target model accepted them (speculative decoding)',
  labelNames: ['model', 'outcome'] as const,
  registers: [registry],
});
export const reconcilerLooks = new client.Counter({
  name: 'kiln_reconciler_looks_total',
  help: 'Looks the reconciler took at open rows and held slots whose workflow may have closed early (one every KILN_RECONCILE_INTERVAL_MS)',
  registers: [registry],
});
export const webhookAttempts = new client.Counter({
  name: 'kiln_webhook_attempts_total',
  help: 'Webhook delivery attempts by event and outcome',
  labelNames: ['event', 'outcome'] as const,
  registers: [registry],
});
export const httpRequests = new client.Histogram({
  name: 'kiln_http_request_seconds',
  help: 'API requests by route and status',
  labelNames: ['method', 'route', 'status'] as const,
  buckets: seconds,
  registers: [registry],
});

/** Observes a prediction once, when its terminal state is first written. */
export function observePrediction(p: { model: string; status: string; metrics: Record<string, number | string> }): void {
  const labels = { model: p.model };
  predictionsTotal.inc({ model: p.model, status: p.status });
  // Figures only: a few metrics are words (cache_tier).
  const m = Object.fromEntries(Object.entries(p.metrics).filter((e): e is [string, number] => typeof e[1] === 'number'));
  if (m.queue_time !== undefined) queueSeconds.observe(labels, m.queue_time);
  if (m.setup_time !== undefined) {
    setupSeconds.observe(labels, m.setup_time);
    coldStarts.inc(labels);
  }
  if (m.predict_time !== undefined) predictSeconds.observe(labels, m.predict_time);
  if (m.tokens_per_second !== undefined) tokensPerSecond.observe(labels, m.tokens_per_second);
  if (m.draft_tokens_accepted !== undefined) draftTokens.inc({ model: p.model, outcome: 'accepted' }, m.draft_tokens_accepted);
  if (m.draft_tokens_rejected !== undefined) draftTokens.inc({ model: p.model, outcome: 'rejected' }, m.draft_tokens_rejected);
}

/** A prediction's speculative decoding figures: acceptance rate = accepted ÷ (accepted + rejected). */
export function draftMetrics({ accepted, rejected }: { accepted: number; rejected: number }): Record<string, number> {
  const drafted = accepted + rejected;
  return {
    draft_tokens_accepted: accepted,
    draft_tokens_rejected: rejected,
    ...(drafted > 0 ? { draft_acceptance_rate: Number((accepted / drafted).toFixed(4)) } : {}),
  };
}

/** A tiny server for a worker's /metrics. */
export function serveMetrics(port: number, host: string): http.Server {
  return http
    .createServer(async (req, res) => {
      if (req.url !== '/metrics') return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': registry.contentType }).end(await registry.metrics());
    })
    .listen(port, host);
}
