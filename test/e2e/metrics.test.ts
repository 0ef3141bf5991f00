/** Prometheus metrics: the API's at /metrics, each worker's on its metrics port. */
import { closeDb, type Db } from '../../db/client';
import { API_URL, api, newAccount, poll, testDb } from '../helpers';
import { startReceiver } from '../receiver';

jest.setTimeout(60_000);

let db: Db;
beforeAll(() => {
  db = testDb();
});
afterAll(() => closeDb(db));

const scrape = async (url: string) => (await fetch(url)).text();
/** The API's /metrics wants the operator's scrape token (KILN_METRICS_TOKEN), as Prometheus sends it. */
const scrapeApi = async () => {
  const res = await fetch(`${API_URL}/metrics`, { headers: { authorization: `Bearer ${process.env.KILN_METRICS_TOKEN}` } });
  expect(res.status).toBe(200);
  return res.text();
};
const value = (text: string, series: string) => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
};

test('predictions, cold starts, queue and predict time, webhook attempts and HTTP requests are measured', async () => {
  const control = `http://127.0.0.1:${process.env.KILN_CONTROL_METRICS_PORT ?? 9474}/metrics`;
  const series = 'kiln_predictions_total{model="kiln/tiny-llama",status="succeeded"}';
  const before = value(await scrape(control), series);
  const { token } = await newAccount(db, 'metrics');
  const rx = await startReceiver();
  try {
    const r = await api('/v1/models/kiln/tiny-llama/predictions', {
      token,
      body: { input: { prompt: 'count me', max_tokens: 4 }, webhook: rx.url, webhook_events_filter: ['completed'] },
      headers: { prefer: 'wait' },
    });
    expect(r.body.status).toBe('succeeded');
    const text = await poll(
      () => scrape(control),
      (t) => value(t, series) === before + 1 && t.includes('kiln_webhook_attempts_total{event="completed",outcome="delivered"}'),
    );
    expect(text).toMatch(/kiln_prediction_queue_seconds_count\{model="kiln\/tiny-llama"\} \d+/);
    expect(text).toMatch(/kiln_prediction_predict_seconds_count\{model="kiln\/tiny-llama"\} \d+/);
    expect(text).toMatch(/kiln_prediction_tokens_per_second_bucket/);
  } finally {
    await rx.close();
  }
  const apiMetrics = await scrapeApi();
  expect(apiMetrics).toMatch(
    /kiln_http_request_seconds_count\{method="POST",route="\/v1\/models\/:owner\/:name\/predictions",status="201"\} \d+/,
  );
  expect(apiMetrics).toContain('kiln_process_cpu_seconds_total');
  const engine = await scrape(`http://127.0.0.1:${process.env.KILN_ENGINE_METRICS_PORT ?? 9475}/metrics`);
  expect(engine).toContain('kiln_process_resident_memory_bytes');
});

test("the API's /metrics needs the operator's scrape token: not none, not a tenant's API token", async () => {
  expect(process.env.KILN_METRICS_TOKEN).toBeTruthy();
  const { token } = await newAccount(db, 'metrics-tenant');
  for (const headers of [{}, { authorization: `Bearer ${token}` }, { authorization: 'Bearer kiln_wrong' }] as Record<string, string>[]) {
    const res = await fetch(`${API_URL}/metrics`, { headers });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(await res.json()).toMatchObject({ status: 401, detail: expect.stringContaining('KILN_METRICS_TOKEN') });
  }
  expect(await scrapeApi()).toContain('kiln_http_request_seconds');
});
