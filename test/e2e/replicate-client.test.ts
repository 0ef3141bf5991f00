/** The official `replicate` npm client, pointed at Kiln with baseUrl, works unchanged. */
import { eq } from 'drizzle-orm';
import Replicate, { type Page, type Prediction, validateWebhook } from 'replicate';
import { closeDb, type Db } from '../../db/client';
import { predictions } from '../../db/schema';
import { pacedLlama } from '../fixtures/models';
import { API_URL, newAccount, poll, testDb } from '../helpers';
import { type Receiver, startReceiver } from '../receiver';
import { specCheckedFetch } from '../spec-checked-fetch';

jest.setTimeout(120_000);

let db: Db;
let replicate: Replicate;
let rx: Receiver;
let accountId: string;
// Every response the client sees is checked against the API reference (/openapi.json's contracts).
const spec = specCheckedFetch();
beforeAll(async () => {
  db = testDb();
  const { token, account } = await newAccount(db, 'replicate');
  accountId = account.id;
  replicate = new Replicate({ auth: token, baseUrl: `${API_URL}/v1`, fetch: spec.fetch });
  rx = await startReceiver();
});
afterEach(() => expect(spec.problems.splice(0)).toEqual([]));
afterAll(async () => {
  // The checks ran on the calls above, not on none.
  expect(spec.seen.length).toBeGreaterThan(10);
  await rx.close();
  await closeDb(db);
});

test('predictions.create and wait', async () => {
  const created = await replicate.predictions.create({
    model: 'kiln/tiny-llama',
    input: { prompt: 'The kiln', max_tokens: 10, min_tokens: 10 },
  });
  expect(created.status).toBe('starting');
  const done = await replicate.wait(created, { interval: 100 });
  expect(done.status).toBe('succeeded');
  expect((done.output as string[]).length).toBeGreaterThan(0);
  const again = await replicate.predictions.get(created.id);
  expect(again.output).toEqual(done.output);
});

test('run with a model name and with owner/name:version', async () => {
  const output = (await replicate.run('kiln/tiny-llama', { input: { prompt: 'run', max_tokens: 6, min_tokens: 6, seed: 3 } })) as string[];
  expect(output.join('').length).toBeGreaterThan(0);
  const { version } = await replicate.predictions.create({ model: 'kiln/tiny-llama', input: { prompt: 'v', max_tokens: 1 } });
  const pinned = (await replicate.run(`kiln/tiny-llama:${version}`, {
    input: { prompt: 'run', max_tokens: 6, min_tokens: 6, seed: 3 },
  })) as string[];
  expect(pinned).toEqual(output);
});

test('stream yields output events whose text is the final output', async () => {
  let text = '';
  let sawDone = false;
  for await (const event of replicate.stream('kiln/tiny-llama', { input: { prompt: 'stream', max_tokens: 40, min_tokens: 40, seed: 5 } })) {
    if (event.event === 'output') text += event.data;
    if (event.event === 'done') sawDone = true;
  }
  expect(sawDone).toBe(true);
  const [latest] = (await replicate.predictions.list()).results;
  // SSE carries CR as LF.
  expect(text).toBe((latest.output as string[]).join('').replace(/\r\n?/g, '\n'));
});

test('predictions.cancel stops a long generation', async () => {
  // 2000 paced tokens last 40 s or more on any machine: the cancel lands mid-generation.
  await pacedLlama(db);
  const p = await replicate.predictions.create({
    model: 'kiln-test/paced-llama',
    input: { prompt: 'long', max_tokens: 2000, min_tokens: 2000 },
  });
  await poll(
    () => replicate.predictions.get(p.id),
    (x) => x.status === 'processing',
  );
  await replicate.predictions.cancel(p.id);
  const done = await poll(
    () => replicate.predictions.get(p.id),
    (x) => x.status === 'canceled',
  );
  expect((done.metrics as { output_token_count: number }).output_token_count).toBeLessThan(2000);
});

test('webhooks.default.secret.get and validateWebhook accept what Kiln sends', async () => {
  const { key } = await replicate.webhooks.default.secret.get();
  expect(key).toMatch(/^whsec_/);
  await replicate.predictions.create({
    model: 'kiln/tiny-llama',
    input: { prompt: 'hook', max_tokens: 3 },
    webhook: rx.url,
    webhook_events_filter: ['completed'],
  });
  const [hook] = await poll(
    async () => rx.accepted,
    (a) => a.length >= 1,
  );
  const request = new Request(rx.url, { method: 'POST', headers: hook.headers as Record<string, string>, body: hook.body });
  expect(await validateWebhook(request, key)).toBe(true);
  const forged = new Request(rx.url, {
    method: 'POST',
    headers: hook.headers as Record<string, string>,
    body: hook.body.replace('"', ' "'),
  });
  expect(await validateWebhook(forged, key)).toBe(false);
});

test('paginate walks the cursor pages', async () => {
  // Pages of 2 (the API keeps page_size in its next links): the account's predictions of the
  // tests above fill several, so paginate must follow the cursor to see them all.
  const mine = (await db.select({ id: predictions.id }).from(predictions).where(eq(predictions.accountId, accountId))).map((r) => r.id);
  expect(mine.length).toBeGreaterThanOrEqual(5);
  const firstPage = () =>
    replicate.request('/predictions', { method: 'GET', params: { page_size: 2 } }).then((r) => r.json() as Promise<Page<Prediction>>);
  const pages: string[][] = [];
  for await (const page of replicate.paginate(firstPage)) pages.push(page.map((p) => p.id));
  expect(pages.length).toBe(Math.ceil(mine.length / 2));
  for (const page of pages) expect(page.length).toBeLessThanOrEqual(2);
  const seen = pages.flat();
  expect(seen).toHaveLength(mine.length);
  expect(new Set(seen)).toEqual(new Set(mine));
});
