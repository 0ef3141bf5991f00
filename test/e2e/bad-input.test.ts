/**
 * Bad input that used to answer 500 (issue 15, point 7): malformed ids in paths, multipart
 * without a boundary, a batch input file too big to read into memory, JSON parsed before the
 * token was checked, headers node refuses. Each is a 4xx JSON error naming what is wrong.
 */
import { closeDb, type Db } from '../../db/client';
import { API_URL, api, newAccount, testDb } from '../helpers';

jest.setTimeout(120_000);

let db: Db;
let token: string;

beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'bad-input')).token;
});
afterAll(() => closeDb(db));

const auth = () => ({ authorization: `Bearer ${token}` });

describe('malformed ids', () => {
  test('GET /v1/predictions/%00 is a 400 naming the path', async () => {
    const r = await api('/v1/predictions/%00', { token });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ status: 400, detail: expect.stringMatching(/^path: segment "%00" holds a control character/) });
  });

  test('every route with a path parameter refuses NUL, control characters and broken percent-encoding', async () => {
    const doc = (await api('/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
    const templates = Object.keys(doc.paths).filter((p) => p.includes('{'));
    expect(templates.length).toBeGreaterThan(10);
    const answers: string[] = [];
    for (const template of templates) {
      for (const method of Object.keys(doc.paths[template])) {
        for (const bad of ['%00', 'a%0Ab', '%E0%A4%A', '%C0%AF']) {
          const path = template.replace(/\{\w+\}/g, bad);
          const res = await fetch(`${API_URL}${path}`, { method: method.toUpperCase(), headers: auth() });
          const text = await res.text();
          // Replicate's shape says it in `detail`, OpenAI's (under /openai) in `error.message`.
          const body = method === 'head' ? undefined : (JSON.parse(text) as { detail?: string; error?: { message?: string } });
          const said = body?.detail ?? body?.error?.message ?? '';
          const ok = res.status === 400 && (method === 'head' || said.startsWith('path: '));
          if (!ok) answers.push(`${method.toUpperCase()} ${path} → ${res.status} ${text.slice(0, 120)}`);
        }
      }
    }
    expect(answers).toEqual([]);
  });
});

describe('multipart', () => {
  test('an upload without a boundary is a 400 naming Content-Type', async () => {
    const res = await fetch(`${API_URL}/v1/files`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'multipart/form-data' },
      body: 'content',
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ status: 400, detail: expect.stringMatching(/^Content-Type: .*boundary/) });
  });

  test('a truncated form is a 400 naming the content', async () => {
    const body = '--zzz\r\nContent-Disposition: form-data; name="content"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nhalf a fi';
    const res = await fetch(`${API_URL}/v1/files`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'multipart/form-data; boundary=zzz' },
      body,
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ status: 400, detail: expect.stringMatching(/^content: the multipart form is malformed/) });
  });
});

describe("a batch's input file is capped", () => {
  // infra/test.sh sets the cap low, so that a small upload goes over it.
  const limit = Number(process.env.KILN_BATCH_INPUT_MAX_BYTES);

  test('input_file and input_url over KILN_BATCH_INPUT_MAX_BYTES are a 413 naming the field and the limit', async () => {
    expect(limit).toBeGreaterThan(0);
    const line = `${JSON.stringify({ text: 'x'.repeat(1000) })}\n`;
    const content = line.repeat(Math.ceil((limit + 1) / line.length));
    const form = new FormData();
    form.append('content', new Blob([content], { type: 'application/jsonl' }), 'big.jsonl');
    const uploaded = await fetch(`${API_URL}/v1/files`, { method: 'POST', headers: auth(), body: form });
    expect(uploaded.status).toBe(201);
    const file = (await uploaded.json()) as { id: string; size: number; urls: { get: string } };
    expect(file.size).toBeGreaterThan(limit);

    const byFile = await api('/v1/batches', { token, body: { version: 'kiln/echo-fixture', input_file: file.id } });
    expect(byFile.status).toBe(413);
    expect(byFile.body).toMatchObject({
      status: 413,
      detail: `input_file: has ${file.size} bytes, over the limit of ${limit} bytes for a batch's inputs`,
    });
    const byUrl = await api('/v1/batches', { token, body: { version: 'kiln/echo-fixture', input_url: file.urls.get } });
    expect(byUrl.status).toBe(413);
    expect(byUrl.body.detail).toMatch(new RegExp(`^input_url: .*limit of ${limit} bytes`));
    expect((await api('/v1/batches', { token })).body.results).toEqual([]);
  });
});

describe('JSON bodies are parsed after the token is checked', () => {
  const big = `{"input":{"prompt":"${'y'.repeat(11 * 2 ** 20)}"}}`;

  test.each(['/v1/predictions', '/openai/v1/chat/completions'])(
    'without a token, %s answers 401 to invalid and oversized JSON alike',
    async (path) => {
      for (const rawBody of ['{"version": ', big]) {
        const r = await api(path, { rawBody });
        expect(r.status).toBe(401);
      }
    },
  );

  test('with a token, invalid JSON is a 400 naming the body, and too much is a 413 naming the limit', async () => {
    const invalid = await api('/v1/predictions', { token, rawBody: '{"version": ' });
    expect(invalid.status).toBe(400);
    expect(invalid.body).toMatchObject({
      status: 400,
      detail: expect.stringMatching(/^body: is not valid JSON/),
      invalid_fields: [expect.objectContaining({ field: 'body' })],
    });
    const tooBig = await api('/v1/predictions', { token, rawBody: big });
    expect(tooBig.status).toBe(413);
    expect(tooBig.body).toMatchObject({
      status: 413,
      detail: `body: is larger than the ${10 * 2 ** 20} byte limit (10 MiB): upload large inputs with POST /v1/files and pass the file's URL`,
    });
    // OpenAI's routes answer in OpenAI's shape, naming the same parameter.
    const openai = await api('/openai/v1/chat/completions', { token, rawBody: big });
    expect(openai.status).toBe(413);
    expect(openai.body.error).toMatchObject({ type: 'invalid_request_error', param: 'body' });
  });
});

test('NUL, which Postgres text cannot hold, is a 422 naming the field', async () => {
  const named = await api('/v1/account/tokens', { token, body: { name: 'a\u0000b' } });
  expect(named.status).toBe(422);
  expect(named.body.invalid_fields).toEqual([expect.objectContaining({ field: 'name', description: expect.stringMatching(/NUL/) })]);
  const nested = await api('/openai/v1/chat/completions', {
    token,
    body: { model: 'kiln/tiny-llama', messages: [{ role: 'user', content: 'hi' }], stop: ['ok', '\u0000'] },
  });
  expect(nested.status).toBe(400);
  expect(nested.body.error).toMatchObject({ param: 'stop[1]', message: expect.stringMatching(/^stop\[1\]: must not contain the NUL/) });
});

test('headers over what node accepts are a 431 in the JSON error shape', async () => {
  const res = await fetch(`${API_URL}/v1/predictions`, { headers: { ...auth(), 'x-padding': 'p'.repeat(20_000) } });
  expect(res.status).toBe(431);
  expect(await res.json()).toMatchObject({ status: 431, detail: expect.stringMatching(/^headers: /) });
});
