/**
 * OpenTelemetry: one trace per prediction, from the API request through the workflow and its
 * activities to the engine. The suite's processes export over OTLP/HTTP (infra/test.sh sets
 * OTEL_EXPORTER_OTLP_ENDPOINT); this test is the collector, keeping the spans in memory.
 */
import http from 'node:http';
import { closeDb, type Db } from '../../db/client';
import { api, newAccount, poll, testDb } from '../helpers';

jest.setTimeout(120_000);

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes?: Array<{ key: string; value: Record<string, unknown> }>;
}
interface Collected extends OtlpSpan {
  service: string;
}

const spans: Collected[] = [];
let collector: http.Server;
let db: Db;
let token: string;

beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'traces')).token;
  collector = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      const doc = JSON.parse(body) as {
        resourceSpans: Array<{ resource: { attributes: OtlpSpan['attributes'] }; scopeSpans: Array<{ spans: OtlpSpan[] }> }>;
      };
      for (const rs of doc.resourceSpans) {
        const service = String(rs.resource.attributes?.find((a) => a.key === 'service.name')?.value.stringValue);
        for (const ss of rs.scopeSpans) for (const s of ss.spans) spans.push({ ...s, service });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  const port = Number(new URL(process.env.OTEL_EXPORTER_OTLP_ENDPOINT!).port);
  await new Promise<void>((resolve) => collector.listen(port, '127.0.0.1', resolve));
});
afterAll(async () => {
  await new Promise((resolve) => collector.close(resolve));
  await closeDb(db);
});

const attribute = (s: OtlpSpan, key: string) => s.attributes?.find((a) => a.key === key)?.value.stringValue;

test('a prediction is one trace: API request, workflow, its activities and the engine, with the prediction id on it', async () => {
  const created = await api('/v1/models/kiln/tiny-llama/predictions', {
    token,
    body: { input: { prompt: 'trace me', max_tokens: 3 } },
    headers: { prefer: 'wait=30' },
  });
  expect(created.body.status).toBe('succeeded');
  const id: string = created.body.id;
  const request = await poll(
    async () => spans.find((s) => attribute(s, 'kiln.prediction_id') === id),
    (s) => s !== undefined,
  );
  const traceId = request!.traceId;
  expect(request!.service).toBe('kiln-api');
  const inTrace = () => spans.filter((s) => s.traceId === traceId);
  // Each process exports on its own schedule (the workflow's spans when its task completes, which
  // on the hot path is after the engine's): wait for the workflow's and the engine's spans both.
  const names = (
    await poll(
      async () => inTrace(),
      (t) => t.some((s) => s.name === 'RunActivity:predict') && t.some((s) => s.name === 'RunWorkflow:predictionWorkflow'),
    )
  ).map((s) => `${s.service} ${s.name}`);
  console.log(`trace ${traceId} of prediction ${id}:\n${[...new Set(names)].join('\n')}`);
  expect(names).toEqual(
    expect.arrayContaining([
      'kiln-api StartWorkflow:predictionWorkflow',
      'kiln-control-worker RunWorkflow:predictionWorkflow',
      'kiln-engine-worker RunActivity:predict',
    ]),
  );
  // Every span that names this prediction's workflow is in this one trace.
  const workflowSpans = spans.filter((s) => s.attributes?.some((a) => a.value.stringValue === `prediction-${id}`));
  expect(workflowSpans.length).toBeGreaterThan(0);
  expect(new Set(workflowSpans.map((s) => s.traceId))).toEqual(new Set([traceId]));
});
