/**
 * @jest-environment ./test/native-typed-arrays-environment.js
 */
/**
 * Payloads by reference through the HTTP API: a 3 MB data-URI image (4 MB of JSON, over
 * Temporal's 2 MB payload limit) runs, its history holds references only, the codec server gives
 * the input back for the Temporal UI, and a body over the API's limit is a 413 naming the limit.
 */
import { randomBytes } from 'node:crypto';
import { closeDb, type Db } from '../../db/client';
import { predictionWorkflowId } from '../../domain/contracts';
import { loadSharp } from '../../engines/onnx/engine';
import { config } from '../../lib/config';
import { isPayloadRef, readPayloadRef } from '../../lib/payload-refs';
import { api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { type Receiver, startReceiver } from '../receiver';
import { testTemporal } from '../temporal';

jest.setTimeout(240_000);

let db: Db;
let token: string;
let rx: Receiver;
let dataUri: string;
let done: any;

/** Every payload anywhere in a history (input, results, local activities, markers, children). */
function payloadsIn(node: unknown, out: Array<{ metadata?: Record<string, Uint8Array> | null; data?: Uint8Array | null }> = []) {
  if (!node || typeof node !== 'object' || node instanceof Uint8Array) return out;
  const o = node as Record<string, unknown>;
  if (o.data instanceof Uint8Array && 'metadata' in o) out.push(o as never);
  for (const v of Object.values(o)) payloadsIn(v, out);
  return out;
}

beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'bigpayload')).token;
  rx = await startReceiver();
  const sharp = await loadSharp();
  // Noise does not compress: a 1024×1024 RGB PNG of about 3 MB.
  const png = await sharp(randomBytes(1024 * 1024 * 3), { raw: { width: 1024, height: 1024, channels: 3 } })
    .png()
    .toBuffer();
  expect(png.length).toBeGreaterThan(3 * 10 ** 6);
  dataUri = `data:image/png;base64,${png.toString('base64')}`;
  const created = await api('/v1/models/kiln/remove-background/predictions', {
    token,
    body: { input: { image: dataUri }, webhook: rx.url, webhook_events_filter: ['start', 'completed'] },
    headers: { prefer: 'wait=60' },
  });
  expect(created.status).toBe(201);
  done = await poll(
    () => api(`/v1/predictions/${created.body.id}`, { token }),
    (r) => TERMINAL.includes(r.body.status),
    { timeoutMs: 180_000, intervalMs: 500 },
  ).then((r) => r.body);
});
afterAll(async () => {
  await rx.close();
  await closeDb(db);
});

test('a 3 MB data-URI image runs through kiln/remove-background, webhooks included', async () => {
  expect(done.status).toBe('succeeded');
  expect(done.input.image).toBe(dataUri);
  expect(done.logs).toMatch(/Removed the background of 1024×1024/);
  const png = await fetch(done.output);
  expect(png.status).toBe(200);
  const { info } = await (await loadSharp())(Buffer.from(await png.arrayBuffer()))
    .raw()
    .toBuffer({ resolveWithObject: true });
  expect([info.width, info.height, info.channels]).toEqual([1024, 1024, 4]);
  // Each webhook child carried the 4 MB prediction too.
  const hooks = await poll(
    async () => rx.accepted,
    (a) => a.some((h) => h.json.status === 'succeeded'),
    { timeoutMs: 60_000 },
  );
  expect(hooks.find((h) => h.json.status === 'succeeded')!.json.input.image).toBe(dataUri);
});

test('its history holds no payload over the inline limit, and the references say what they are', async () => {
  const { client, close } = await testTemporal();
  try {
    const handle = client.workflow.getHandle(predictionWorkflowId(done.id));
    const payloads = payloadsIn(await handle.fetchHistory());
    const limit = config().KILN_PAYLOAD_INLINE_MAX_BYTES;
    expect(Math.max(...payloads.map((p) => p.data!.length))).toBeLessThanOrEqual(limit);
    const refs = payloads.filter((p) => isPayloadRef(p));
    expect(refs.length).toBeGreaterThan(0);
    // Readable without the codec: plain JSON naming size and sha256.
    const shown = JSON.parse(Buffer.from(refs[0].data!).toString());
    expect(shown.kiln_payload_ref).toMatchObject({
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      size: expect.any(Number),
      encoding: 'json/plain',
    });
    expect(shown.kiln_payload_ref.size).toBeGreaterThan(dataUri.length);
    // Search attributes are never encoded: they name the account, model and status, never input or output.
    const indexed = (await handle.describe()).raw.workflowExecutionInfo?.searchAttributes?.indexedFields ?? {};
    expect(
      Object.keys(indexed)
        .filter((k) => k.startsWith('Kiln'))
        .sort(),
    ).toEqual(['KilnAccount', 'KilnModel', 'KilnStatus']);
    for (const p of Object.values(indexed)) expect(p.data!.length).toBeLessThan(256);
    // Kiln's own client decodes them: the workflow's result is the prediction, input and all.
    const result = (await handle.result()) as { input: { image: string } };
    expect(result.input.image).toBe(dataUri);
  } finally {
    await close();
  }
});

test("the API's codec server resolves a reference for the Temporal UI, for the operator only", async () => {
  const { client, close } = await testTemporal();
  let ref;
  try {
    const history = await client.workflow.getHandle(predictionWorkflowId(done.id)).fetchHistory();
    ref = payloadsIn(history.events![0]).find((p) => isPayloadRef(p))!;
  } finally {
    await close();
  }
  expect(readPayloadRef(ref).size).toBeGreaterThan(dataUri.length);
  const body = {
    payloads: [
      {
        metadata: Object.fromEntries(Object.entries(ref.metadata!).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
        data: Buffer.from(ref.data!).toString('base64'),
      },
    ],
  };
  const ui = { origin: 'http://localhost:8233', 'x-namespace': config().TEMPORAL_NAMESPACE };
  const refused = await api('/codec/decode', { body, headers: ui });
  expect(refused.status).toBe(401);
  const decoded = await api('/codec/decode', { body, headers: { ...ui, authorization: `Bearer ${process.env.KILN_OPERATOR_TOKEN}` } });
  expect(decoded.status).toBe(200);
  expect(decoded.headers.get('access-control-allow-origin')).toBe('http://localhost:8233');
  const args = JSON.parse(Buffer.from(decoded.body.payloads[0].data, 'base64').toString());
  expect(args).toMatchObject({ id: done.id, input: { image: dataUri } });
});

test('an output over the limit leaves the engine by reference (its S3 session may create payloads)', async () => {
  const texts = Array.from({ length: 64 }, (_, i) => `text number ${i}`);
  const created = await api('/v1/models/kiln/tiny-embed/predictions', {
    token,
    body: { input: { text: texts } },
    headers: { prefer: 'wait=60' },
  });
  expect(created.status).toBe(201);
  const embedded = await poll(
    () => api(`/v1/predictions/${created.body.id}`, { token }),
    (r) => TERMINAL.includes(r.body.status),
    { timeoutMs: 120_000, intervalMs: 500 },
  ).then((r) => r.body);
  expect(embedded.status).toBe('succeeded');
  expect(embedded.output).toHaveLength(64);
  expect(embedded.output[63]).toHaveLength(256);
  expect(JSON.stringify(embedded.output).length).toBeGreaterThan(config().KILN_PAYLOAD_INLINE_MAX_BYTES);
  const { client, close } = await testTemporal();
  try {
    const history = await client.workflow.getHandle(predictionWorkflowId(embedded.id)).fetchHistory();
    // The predict activity's result, as the engine worker completed it.
    const completed = history
      .events!.filter((e) => e.activityTaskCompletedEventAttributes)
      .map((e) => e.activityTaskCompletedEventAttributes!.result!.payloads![0]);
    expect(completed.some((p) => isPayloadRef(p))).toBe(true);
    expect(Math.max(...payloadsIn(history).map((p) => p.data!.length))).toBeLessThanOrEqual(config().KILN_PAYLOAD_INLINE_MAX_BYTES);
  } finally {
    await close();
  }
});

test('a body over the API limit gets 413 naming the limit', async () => {
  const r = await api('/v1/models/kiln/remove-background/predictions', {
    token,
    rawBody: JSON.stringify({ input: { image: `data:image/png;base64,${'A'.repeat(11 * 2 ** 20)}` } }),
  });
  expect(r.status).toBe(413);
  expect(r.body).toMatchObject({ status: 413, invalid_fields: [{ field: 'body' }] });
  expect(r.body.detail).toMatch(/10485760 byte limit/);
});
