/**
 * Absolute URLs in responses come from configuration (KILN_PUBLIC_URL, else the address the API
 * listens on), never from the request's Host or X-Forwarded-* headers, which a client chooses.
 */
import http from 'node:http';
import { closeDb, type Db } from '../../db/client';
import { API_URL, api, newAccount, testDb } from '../helpers';

let db: Db;
let token: string;
beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'urls')).token;
});
afterAll(() => closeDb(db));

/** fetch() will not send another Host: a raw request will. */
function rawRequest(path: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; body: any }> {
  const target = new URL(path, API_URL);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname + target.search,
        method: payload ? 'POST' : 'GET',
        headers: {
          ...headers,
          ...(payload ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const spoofed = { host: 'evil.example', 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' };

test("a prediction's URLs and the OpenAPI servers ignore the Host a client sends", async () => {
  const created = await rawRequest(
    '/v1/models/kiln/echo-fixture/predictions',
    { ...spoofed, authorization: `Bearer ${token}` },
    { input: { text: 'where am I' } },
  );
  expect(created.status).toBe(201);
  const { temporal_ui: temporalUi, ...urls } = created.body.urls as Record<string, string>;
  for (const url of Object.values(urls)) expect(url.startsWith(`${API_URL}/v1/predictions/${created.body.id}`)).toBe(true);
  // The operators' Temporal UI link comes from KILN_TEMPORAL_UI_URL, never from the request either.
  expect(temporalUi.startsWith(`${process.env.KILN_TEMPORAL_UI_URL}/`)).toBe(true);
  const read = await rawRequest(`/v1/predictions/${created.body.id}`, { ...spoofed, authorization: `Bearer ${token}` });
  expect(read.body.urls.stream.startsWith(`${API_URL}/`)).toBe(true);
  const doc = await rawRequest('/openapi.json', spoofed);
  expect(doc.body.servers).toEqual([{ url: API_URL }]);
  const models = await rawRequest('/v1/models', { ...spoofed, authorization: `Bearer ${token}` });
  expect(JSON.stringify(models.body)).not.toContain('evil.example');
});

test('every response says nosniff and may not be framed', async () => {
  const r = await api('/v1/account', { token });
  expect(r.status).toBe(200);
  expect(r.headers.get('x-content-type-options')).toBe('nosniff');
  expect(r.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
  expect(r.headers.get('referrer-policy')).toBe('no-referrer');
  const missing = await api('/v1/nothing-here');
  expect(missing.headers.get('x-content-type-options')).toBe('nosniff');
  // The reference page runs only the script the API wrote into it.
  const docs = await fetch(`${API_URL}/docs`);
  const csp = docs.headers.get('content-security-policy')!;
  expect(csp).toMatch(/script-src 'sha256-[\w+/=]+'/);
  expect(csp).not.toContain('unsafe-inline');
});
