/** The official `replicate` npm client, pointed at Kiln with baseUrl, works unchanged. */
import Replicate, { validateWebhook } from 'replicate';
import { closeDb, type Db } from '../../db/client';
import { API_URL, newAccount, poll, testDb } from '../helpers';
import { startReceiver, type Receiver } from '../receiver';

jest.setTimeout(120_000);

let db: Db;
let replicate: Replicate;
let rx: Receiver;
beforeAll(async () => {
  db = testDb();
  const { token } = await newAccount(db, 'replicate');
  replicate = new Replicate({ auth: token, baseUrl: `${API_URL}/v1` });
  rx = await startReceiver();
});
afterAll(async () => {
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
  const p = await replicate.predictions.create({ model: 'kiln/tiny-llama', input: { prompt: 'long', max_tokens: 8192, min_tokens: 8192 } });
  await poll(() => replicate.predictions.get(p.id), (x) => x.status === 'processing');
  await replicate.predictions.cancel(p.id);
  const done = await poll(() => replicate.predictions.get(p.id), (x) => x.status === 'canceled');
  expect((done.metrics as { output_token_count: number }).output_token_count).toBeLessThan(8192);
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
  const [hook] = await poll(async () => rx.accepted, (a) => a.length >= 1);
  const request = new Request(rx.url, { method: 'POST', headers: hook.headers as Record<string, string>, body: hook.body });
  expect(await validateWebhook(request, key)).toBe(true);
  const forged = new Request(rx.url, { method: 'POST', headers: hook.headers as Record<string, string>, body: hook.body.replace('"', ' "') });
  expect(await validateWebhook(forged, key)).toBe(false);
});

test('paginate walks the cursor pages', async () => {
  const seen: string[] = [];
  for await (const page of replicate.paginate(() => replicate.predictions.list())) seen.push(...page.map((p) => p.id));
  expect(seen.length).toBeGreaterThanOrEqual(5);
  expect(new Set(seen).size).toBe(seen.length);
});
