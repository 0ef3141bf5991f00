/** Payloads by reference (lib/payload-refs.ts) and the codec server that resolves them for the Temporal UI (api/codec-server.ts). */
import type { AddressInfo } from 'node:net';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import express from 'express';
import pino from 'pino';
import { codecServer } from '../../api/codec-server';
import { errorHandler } from '../../api/errors';
import { isPayloadRef, PayloadRefCodec, type PayloadStore, payloadKey, readPayloadRef } from '../../lib/payload-refs';

/** A store in memory that counts puts, as the bucket would see them. */
function memoryStore() {
  const objects = new Map<string, Uint8Array>();
  const puts: string[] = [];
  const store: PayloadStore = {
    async putOnce(key, body) {
      puts.push(key);
      if (!objects.has(key)) objects.set(key, Uint8Array.from(body));
    },
    async get(key) {
      const o = objects.get(key);
      if (!o) throw Object.assign(new Error(`NoSuchKey ${key}`), { name: 'NoSuchKey' });
      return o;
    },
  };
  return { store, objects, puts };
}

const LIMIT = 1024;
const big = { input: { image: `data:image/png;base64,${'A'.repeat(5000)}` }, note: 'héllo ✓' };
const small = { input: { prompt: 'hi' } };

test('a payload over the limit becomes a readable reference; decoding gives back the same payload', async () => {
  const { store, objects } = memoryStore();
  const codec = new PayloadRefCodec(store, { inlineMaxBytes: LIMIT });
  const original = [defaultPayloadConverter.toPayload(big), defaultPayloadConverter.toPayload(small)];
  const encoded = await codec.encode(original);

  expect(encoded[1]).toBe(original[1]);
  expect(isPayloadRef(encoded[0])).toBe(true);
  expect(encoded[0].data!.length).toBeLessThan(LIMIT);
  // Readable without any codec: json/plain that says what it stands for.
  expect(Buffer.from(encoded[0].metadata!.encoding!).toString()).toBe('json/plain');
  const shown = defaultPayloadConverter.fromPayload<{
    kiln_payload_ref: { sha256: string; size: number; encoding: string; preview: string };
  }>(encoded[0]);
  expect(shown.kiln_payload_ref).toMatchObject({ size: original[0].data!.length, encoding: 'json/plain' });
  expect(shown.kiln_payload_ref.preview.startsWith('{"input":{"image":"data:image/png;base64,AAAA')).toBe(true);
  expect([...objects.keys()]).toEqual([payloadKey(shown.kiln_payload_ref.sha256)]);

  // A fresh codec (another process): nothing cached, read from the store.
  const decoded = await new PayloadRefCodec(store, { inlineMaxBytes: LIMIT }).decode(encoded);
  expect(defaultPayloadConverter.fromPayload(decoded[0])).toEqual(big);
  expect(decoded[0].metadata).toEqual({ encoding: Buffer.from('json/plain') });
  expect(decoded[1]).toBe(original[1]);
});

test('content addressed: the same bytes are stored once, and this process skips the put it already made', async () => {
  const { store, objects, puts } = memoryStore();
  const codec = new PayloadRefCodec(store, { inlineMaxBytes: LIMIT });
  const p = defaultPayloadConverter.toPayload(big);
  const [a, b] = await codec.encode([p, p]);
  const [c] = await codec.encode([p]);
  expect(readPayloadRef(a).sha256).toBe(readPayloadRef(b).sha256);
  expect(readPayloadRef(c).sha256).toBe(readPayloadRef(a).sha256);
  expect(objects.size).toBe(1);
  expect(puts).toHaveLength(1);
});

test('stored bytes that do not match the reference are refused', async () => {
  const { store, objects } = memoryStore();
  const [ref] = await new PayloadRefCodec(store, { inlineMaxBytes: LIMIT }).encode([defaultPayloadConverter.toPayload(big)]);
  const key = payloadKey(readPayloadRef(ref).sha256);
  const forged = Buffer.from(objects.get(key)!);
  forged[10] ^= 1;
  objects.set(key, forged);
  await expect(new PayloadRefCodec(store, { inlineMaxBytes: LIMIT }).decode([ref])).rejects.toThrow(/does not match its reference/);
});

describe('the codec server', () => {
  const TOKEN = 'operator-token-0123456789';
  const UI = 'http://localhost:8233';
  let base: string;
  let server: import('node:http').Server;
  let ref: Payload;

  beforeAll(async () => {
    const { store } = memoryStore();
    const codec = new PayloadRefCodec(store, { inlineMaxBytes: LIMIT });
    [ref] = await codec.encode([defaultPayloadConverter.toPayload(big)]);
    const app = express();
    app.use(codecServer({ codec: new PayloadRefCodec(store, { inlineMaxBytes: LIMIT }), operatorToken: TOKEN, corsOrigins: [UI] }));
    app.use(errorHandler(pino({ level: 'silent' })));
    server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((r) => server.close(r)));

  const wire = (p: Payload) => ({
    metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
    data: Buffer.from(p.data!).toString('base64'),
  });
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-namespace': 'kiln-test', origin: UI, ...headers },
      body: JSON.stringify(body),
    });

  test('decode needs the operator token, and gives back the original JSON', async () => {
    const anonymous = await post('/codec/decode', { payloads: [wire(ref)] });
    expect(anonymous.status).toBe(401);
    // The UI can still read the refusal: CORS headers on errors too.
    expect(anonymous.headers.get('access-control-allow-origin')).toBe(UI);
    expect((await post('/codec/decode', { payloads: [wire(ref)] }, { authorization: 'Bearer wrong-token-0123456789' })).status).toBe(401);

    const res = await post('/codec/decode', { payloads: [wire(ref)] }, { authorization: `Bearer ${TOKEN}` });
    expect(res.status).toBe(200);
    const { payloads } = (await res.json()) as { payloads: Array<{ metadata: Record<string, string>; data: string }> };
    expect(Buffer.from(payloads[0].metadata.encoding, 'base64').toString()).toBe('json/plain');
    expect(JSON.parse(Buffer.from(payloads[0].data, 'base64').toString())).toEqual(big);

    // The UI sends no header over plain HTTP: the token may be the endpoint's last segment.
    const inPath = await post(`/codec/${TOKEN}/decode`, { payloads: [wire(ref)] });
    expect(inPath.status).toBe(200);
  });

  test('encode stores what is over the limit; bad bodies name the field', async () => {
    const res = await post(
      '/codec/encode',
      { payloads: [wire(defaultPayloadConverter.toPayload(big))] },
      { authorization: `Bearer ${TOKEN}` },
    );
    const { payloads } = (await res.json()) as { payloads: Array<{ metadata: Record<string, string>; data: string }> };
    expect(JSON.parse(Buffer.from(payloads[0].data, 'base64').toString()).kiln_payload_ref.sha256).toBe(readPayloadRef(ref).sha256);
    const bad = await post('/codec/decode', { payloads: [{ data: 'not base64!' }] }, { authorization: `Bearer ${TOKEN}` });
    expect(bad.status).toBe(422);
    expect(((await bad.json()) as { detail: string }).detail).toMatch(/payloads\.0\.data/);
  });

  test('preflight from the UI origin is answered; another origin is refused', async () => {
    const ok = await fetch(`${base}/codec/decode`, {
      method: 'OPTIONS',
      headers: {
        origin: UI,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type,x-namespace,authorization',
      },
    });
    expect(ok.status).toBe(204);
    expect(ok.headers.get('access-control-allow-origin')).toBe(UI);
    expect(ok.headers.get('access-control-allow-headers')).toMatch(/X-Namespace/);
    expect(ok.headers.get('access-control-allow-methods')).toMatch(/POST/);
    const other = await fetch(`${base}/codec/decode`, {
      method: 'OPTIONS',
      headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST' },
    });
    expect(other.status).toBe(403);
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
  });
});
