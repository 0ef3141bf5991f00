/** Replicate's SSE stream: fed by the engine through Postgres NOTIFY, replayable, resumable. */
import { eq } from 'drizzle-orm';
import { streamUrl } from '../../api/prediction-json';
import { closeDb, type Db } from '../../db/client';
import { models } from '../../db/schema';
import { UrlSigner } from '../../lib/signing';
import { pacedLlama } from '../fixtures/models';
import { API_URL, api, newAccount, poll, TERMINAL, testDb } from '../helpers';
import { readSse } from '../sse';

jest.setTimeout(120_000);

let db: Db;
let token: string;
beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'sse')).token;
});
afterAll(() => closeDb(db));

const create = (input: Record<string, unknown>) => api('/v1/models/kiln/tiny-llama/predictions', { token, body: { input } });
/** What SSE can carry: CR and CRLF arrive as LF. */
const sseText = (output: string[]) => output.join('').replace(/\r\n?/g, '\n');

const finished = (id: string) =>
  poll(
    () => api(`/v1/predictions/${id}`, { token }),
    (r) => TERMINAL.includes(r.body.status),
    { timeoutMs: 60_000 },
  ).then((r) => r.body);

test('a stream from the start carries every chunk in order, then done', async () => {
  const p = (await create({ prompt: 'stream', max_tokens: 200, min_tokens: 200, seed: 9 })).body;
  expect(p.urls.stream).toMatch(/\/stream\?expires=\d+&sig=/);
  const { status, events, contentType } = await readSse(p.urls.stream);
  expect(status).toBe(200);
  expect(contentType).toMatch(/^text\/event-stream/);
  const done = await finished(p.id);
  const output = events
    .filter((e) => e.event === 'output')
    .map((e) => e.data)
    .join('');
  expect(output).toBe(sseText(done.output));
  expect(events[events.length - 1]).toMatchObject({ event: 'done', data: '{}' });
  const ids = events.filter((e) => e.id !== undefined).map((e) => Number(e.id));
  expect(ids.every((id, i) => i === 0 || id > ids[i - 1])).toBe(true);
  expect(events.some((e) => e.event === 'logs' && e.data.includes('Generated 200 tokens'))).toBe(true);
});

test('a client that joins late gets what was produced so far, and the rest', async () => {
  const p = (await create({ prompt: 'late', max_tokens: 50, min_tokens: 50 })).body;
  const done = await finished(p.id);
  const { events } = await readSse(p.urls.stream);
  expect(
    events
      .filter((e) => e.event === 'output')
      .map((e) => e.data)
      .join(''),
  ).toBe(sseText(done.output));
  expect(events[events.length - 1].event).toBe('done');
});

test('reconnecting with Last-Event-ID resumes with no gap and no duplicate', async () => {
  const p = (await create({ prompt: 'resume', max_tokens: 2000, min_tokens: 2000 })).body;
  // Read a few events, drop the connection, come back with the last id seen.
  const first = await readSse(p.urls.stream, { until: (_e, all) => all.filter((x) => x.event === 'output').length >= 3 });
  const lastId = first.events[first.events.length - 1].id!;
  const rest = await readSse(p.urls.stream, { headers: { 'last-event-id': lastId } });
  const done = await finished(p.id);
  const all = [...first.events, ...rest.events];
  const ids = all.filter((e) => e.id !== undefined).map((e) => Number(e.id));
  expect(new Set(ids).size).toBe(ids.length);
  expect(
    all
      .filter((e) => e.event === 'output')
      .map((e) => e.data)
      .join(''),
  ).toBe(sseText(done.output));
});

test('while a generation runs, GET and a Prefer: wait that runs out show the output so far (as Replicate does)', async () => {
  const paced = await pacedLlama(db);
  const model = await db.query.models.findFirst({ where: eq(models.id, paced.modelId) });
  const path = `/v1/models/${model!.owner}/${model!.name}/predictions`;
  // 300 paced tokens: at least 6 s of generation.
  const input = { prompt: 'so far', max_tokens: 300, min_tokens: 300, seed: 4 };
  const p = (await api(path, { token, body: { input } })).body;
  const seen = await readSse(p.urls.stream, { until: (_e, all) => all.filter((x) => x.event === 'output').length >= 3 });
  const streamed = seen.events
    .filter((e) => e.event === 'output')
    .map((e) => e.data)
    .join('');
  const running = (await api(`/v1/predictions/${p.id}`, { token })).body;
  // Not finished (the projection may still say `starting`: the start is written a moment after the first tokens).
  expect(['starting', 'processing']).toContain(running.status);
  const soFar = (running.output as string[]).join('').replace(/\r\n?/g, '\n');
  expect(soFar.startsWith(streamed)).toBe(true);

  const done = await finished(p.id);
  expect(sseText(done.output).startsWith(soFar)).toBe(true);
  expect(sseText(done.output).length).toBeGreaterThan(soFar.length);

  // The model is warm now: one waited on for 2 s (of 40 s of generation) answers while it runs, with its tokens so far.
  const waited = await api(path, {
    token,
    body: { input: { ...input, max_tokens: 2000, min_tokens: 2000 } },
    headers: { prefer: 'wait=2' },
  });
  expect(waited.status).toBe(201);
  expect(['starting', 'processing']).toContain(waited.body.status);
  expect((waited.body.output as string[]).join('').length).toBeGreaterThan(0);
  await api(`/v1/predictions/${waited.body.id}/cancel`, { token, method: 'POST' });
  expect((await finished(waited.body.id)).status).toBe('canceled');
});

test('a canceled prediction’s stream ends with done and the reason', async () => {
  // 2000 paced tokens last 40 s or more on any machine: the cancel lands mid-generation.
  await pacedLlama(db);
  const p = (
    await api('/v1/models/kiln-test/paced-llama/predictions', {
      token,
      body: { input: { prompt: 'cancel me', max_tokens: 2000, min_tokens: 2000 } },
    })
  ).body;
  const reading = readSse(p.urls.stream);
  await poll(
    () => api(`/v1/predictions/${p.id}`, { token }),
    (r) => r.body.status !== 'starting',
  );
  await api(`/v1/predictions/${p.id}/cancel`, { token, method: 'POST' });
  const { events } = await reading;
  expect(events[events.length - 1]).toMatchObject({ event: 'done', data: '{"reason":"canceled"}' });
  const done = await finished(p.id);
  expect(done.status).toBe('canceled');
  expect(done.metrics.output_token_count).toBeLessThan(2000);
});

test('the stream URL is a capability: a wrong signature needs the owner’s token', async () => {
  const p = (await create({ prompt: 'auth', max_tokens: 2 })).body;
  await finished(p.id);
  const bare = p.urls.stream.replace(/\?.*$/, '');
  expect((await readSse(`${bare}?sig=forged`)).status).toBe(401);
  expect((await readSse(bare, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
  const { token: stranger } = await newAccount(db, 'sse-stranger');
  expect((await readSse(bare, { headers: { authorization: `Bearer ${stranger}` } })).status).toBe(404);
});

test('a stream URL expires, and its signature covers the expiry', async () => {
  const p = (await create({ prompt: 'expiry', max_tokens: 2 })).body;
  await finished(p.id);
  const url = new URL(p.urls.stream);
  const expires = Number(url.searchParams.get('expires'));
  // Each read signs a fresh URL, valid for the hour to come.
  const now = Math.floor(Date.now() / 1000);
  expect(expires).toBeGreaterThan(now);
  expect(expires).toBeLessThanOrEqual(now + 3600 + 5);
  const again = new URL((await api(`/v1/predictions/${p.id}`, { token })).body.urls.stream);
  expect(Number(again.searchParams.get('expires'))).toBeGreaterThanOrEqual(expires);
  expect((await readSse(p.urls.stream)).status).toBe(200);

  // A later expiry on the same signature is a forgery.
  url.searchParams.set('expires', String(expires + 10 * 365 * 86400));
  const stretched = await fetch(url);
  expect(stretched.status).toBe(401);
  expect(await stretched.json()).toMatchObject({ status: 401, detail: expect.stringMatching(/expired|signed/) });

  // A URL the API itself signed two hours ago no longer works, nor does one with no signature at all.
  const signer = new UrlSigner(process.env.KILN_URL_SIGNING_KEY!);
  const twoHoursAgo = Date.now() - 2 * 3600_000;
  const clock = jest.spyOn(Date, 'now').mockReturnValue(twoHoursAgo);
  const old = streamUrl({ baseUrl: API_URL, signer }, p.id);
  clock.mockRestore();
  expect(Number(new URL(old).searchParams.get('expires'))).toBeLessThan(now);
  expect(new URL(old).pathname).toBe(url.pathname);
  const expired = await fetch(old);
  expect(expired.status).toBe(401);
  expect(await expired.json()).toMatchObject({ status: 401 });
  const unsigned = await fetch(`${API_URL}${url.pathname}`);
  expect(unsigned.status).toBe(401);
  expect(unsigned.headers.get('content-type')).toMatch(/^application\/json/);
});
