/**
 * Completion → delivery: from a prediction's completed_at to the moment a receiver on this
 * machine has the `completed` webhook, over many predictions.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { apiToken, call, ms, percentile, pool, saveResult, table } from './lib';

export async function webhookLatency(opts: { requests: number; concurrency: number }) {
  const token = await apiToken();
  const arrivals = new Map<string, number>();
  const waiters = new Map<string, () => void>();
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const at = Date.now();
      const p = JSON.parse(body);
      if (p.status === 'succeeded') {
        arrivals.set(p.id, at - Date.parse(p.completed_at));
        waiters.get(p.id)?.();
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  try {
    await pool(opts.requests, opts.concurrency, async () => {
      const p = await call(token, '/v1/models/kiln/tiny-llama/predictions', {
        input: { prompt: 'hook', max_tokens: 8 },
        webhook: url,
        webhook_events_filter: ['completed'],
      });
      await new Promise<void>((resolve, reject) => {
        if (arrivals.has(p.id)) return resolve();
        waiters.set(p.id, resolve);
        setTimeout(() => reject(new Error(`no webhook for ${p.id} in 30 s`)), 30_000).unref();
      });
    });
  } finally {
    server.close();
  }
  const latencies = [...arrivals.values()];
  const rows = [
    {
      predictions: latencies.length,
      concurrency: opts.concurrency,
      'completed → delivered p50': ms(percentile(latencies, 50)),
      p99: ms(percentile(latencies, 99)),
      max: ms(Math.max(...latencies)),
    },
  ];
  table('Webhooks: completed_at → receiver has the completed event (clock: this machine)', rows);
  console.log(`saved ${await saveResult('webhooks', rows)}`);
}
