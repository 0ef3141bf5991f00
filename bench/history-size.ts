/**
 * `npm run bench -- history`: how big a prediction's workflow history is (bytes as Temporal
 * stores it, protobuf, and events), and its largest payload, for warm kiln/tiny-llama
 * predictions and kiln/remove-background predictions with a small and a 3 MB image. The floor
 * beside each is the request body the client sent: history bytes per body byte. Each case runs
 * `runs` times and shows the median and the range: how many workflow tasks a prediction takes
 * depends on timing (an activity that ends while a workflow task runs joins the next one).
 */
import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { loadSharp } from '../engines/onnx/engine';
import { API_URL, apiToken, saveResult, table } from './lib';

interface HistoryFigures {
  case: string;
  status: string;
  body_bytes: number;
  /** Median over the runs, then [min–max]. */
  history_bytes: string;
  events: string;
  largest_payload_bytes: number | string;
  /** Payloads stored by reference (lib/payload-refs.ts): the history holds their references. */
  references: string;
  history_per_body_byte: string;
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)];
const spread = (v: number[]) => `${median(v)} [${Math.min(...v)}–${Math.max(...v)}]`;

type AnyPayload = { data: Uint8Array; metadata?: Record<string, Uint8Array> | null };

/** Every payload anywhere in the history. */
function payloadsIn(node: unknown, out: AnyPayload[] = []): AnyPayload[] {
  if (!node || typeof node !== 'object' || node instanceof Uint8Array) return out;
  const o = node as Record<string, unknown>;
  if (o.data instanceof Uint8Array && 'metadata' in o) out.push(o as AnyPayload);
  for (const v of Object.values(o)) payloadsIn(v, out);
  return out;
}

async function predict(
  token: string,
  model: string,
  input: unknown,
): Promise<{ status: number; id?: string; state: string; bodyBytes: number }> {
  const body = JSON.stringify({ input });
  const res = await fetch(`${API_URL}/v1/models/${model}/predictions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', prefer: 'wait=60' },
    body,
  });
  const json = (await res.json()) as { id?: string; status?: string; detail?: string };
  return {
    status: res.status,
    id: json.id,
    state: json.status ?? `HTTP ${res.status}: ${json.detail}`,
    bodyBytes: Buffer.byteLength(body),
  };
}

export async function historySize(opts: { runs: number }): Promise<void> {
  const token = await apiToken();
  const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' });
  // No codec: the history as the server holds it, which is what this measures.
  const client = new Client({ connection, namespace: process.env.TEMPORAL_NAMESPACE ?? 'default' });
  const sharp = await loadSharp();
  const small = await sharp(
    Buffer.from(
      '<svg xmlns="http://www.w3.org/2000/svg" width="240" height="160"><rect width="100%" height="100%" fill="white"/><circle cx="120" cy="80" r="50" fill="#d01818"/></svg>',
    ),
  )
    .png()
    .toBuffer();
  // Noise does not compress: 1024×1024 RGB makes a PNG of about 3 MB.
  const large = await sharp(randomBytes(1024 * 1024 * 3), { raw: { width: 1024, height: 1024, channels: 3 } })
    .png()
    .toBuffer();
  const cases: Array<[string, string, unknown]> = [
    ['tiny-llama, warm, 16 tokens', 'kiln/tiny-llama', { prompt: 'Once upon a time', max_tokens: 16 }],
    [
      `remove-background, ${(small.length / 1024).toFixed(1)} KiB PNG`,
      'kiln/remove-background',
      { image: `data:image/png;base64,${small.toString('base64')}` },
    ],
    [
      `remove-background, ${(large.length / 2 ** 20).toFixed(2)} MiB PNG`,
      'kiln/remove-background',
      { image: `data:image/png;base64,${large.toString('base64')}` },
    ],
  ];
  // Warm both models first: the figures are of warm predictions.
  await predict(token, 'kiln/tiny-llama', { prompt: 'warm up', max_tokens: 4 });
  await predict(token, 'kiln/remove-background', { image: `data:image/png;base64,${small.toString('base64')}` });
  const rows: HistoryFigures[] = [];
  try {
    for (const [name, model, input] of cases) {
      const runs = [];
      for (let i = 0; i < opts.runs; i++) {
        const r = await predict(token, model, input);
        if (!r.id) {
          runs.push({ r, bytes: NaN, events: NaN, largest: NaN, refs: NaN });
          continue;
        }
        const history = await client.workflow.getHandle(`prediction-${r.id}`).fetchHistory();
        const payloads = payloadsIn(history);
        runs.push({
          r,
          bytes: temporal.api.history.v1.History.encode(history).finish().length,
          events: history.events?.length ?? 0,
          largest: Math.max(0, ...payloads.map((p) => p.data.length)),
          // The metadata key lib/payload-refs.ts marks references with (spelled out: the bench also runs on code without it).
          refs: payloads.filter((p) => p.metadata?.['kiln-payload-ref']).length,
        });
      }
      const ok = runs.filter((x) => x.r.id);
      const statuses = [...new Set(runs.map((x) => x.r.state))].join(', ');
      const body = runs[0].r.bodyBytes;
      rows.push(
        ok.length === 0
          ? {
              case: name,
              status: statuses,
              body_bytes: body,
              history_bytes: '-',
              events: '-',
              largest_payload_bytes: '-',
              references: '-',
              history_per_body_byte: '-',
            }
          : {
              case: name,
              status: statuses,
              body_bytes: body,
              history_bytes: spread(ok.map((x) => x.bytes)),
              events: spread(ok.map((x) => x.events)),
              largest_payload_bytes: Math.max(...ok.map((x) => x.largest)),
              references: spread(ok.map((x) => x.refs)),
              history_per_body_byte: (median(ok.map((x) => x.bytes)) / body).toPrecision(3),
            },
      );
    }
  } finally {
    await connection.close();
  }
  table(
    'Workflow history of one prediction (protobuf bytes as stored; floor: the request body)',
    rows as unknown as Array<Record<string, string | number>>,
  );
  console.log(`saved ${await saveResult('history-size', rows)}`);
}
