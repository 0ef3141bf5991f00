/**
 * Batches through the API, the workflow, the engine's chunk activity and MinIO: inline inputs,
 * a JSONL file (uploaded, and by URL), validation before anything starts, accounts kept apart,
 * cancel, pages. The suite runs with KILN_BATCH_CHUNKS_PER_RUN=4, so batches of more than four
 * chunks continue as new on the way.
 */
import { closeDb, type Db } from '../../db/client';
import { batchWorkflowId } from '../../domain/batch-contracts';
import { KilnStatus } from '../../domain/search-attributes';
import { API_URL, api, newAccount, poll, testDb } from '../helpers';
import { testTemporal } from '../temporal';

jest.setTimeout(120_000);

let db: Db;
let alice: string;
let bob: string;
let temporal: Awaited<ReturnType<typeof testTemporal>>;

beforeAll(async () => {
  db = testDb();
  alice = (await newAccount(db, 'batch-a')).token;
  bob = (await newAccount(db, 'batch-b')).token;
  temporal = await testTemporal();
});
afterAll(async () => {
  await temporal.close();
  await closeDb(db);
});

const DONE = ['succeeded', 'failed', 'canceled'];

async function finished(id: string, token = alice, timeoutMs = 90_000) {
  return poll(
    () => api(`/v1/batches/${id}`, { token }),
    (r) => DONE.includes(r.body.status),
    { timeoutMs, intervalMs: 200 },
  ).then((r) => r.body);
}

/** The output JSONL, read through its signed URL (no token). */
async function results(batch: {
  output_file: { urls: { get: string } };
}): Promise<Array<{ index: number; output?: unknown; error?: string }>> {
  const res = await fetch(batch.output_file.urls.get);
  expect(res.status).toBe(200);
  const text = await res.text();
  expect(text.endsWith('\n')).toBe(true);
  return text
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l));
}

async function upload(token: string, name: string, content: string): Promise<{ id: string; urls: { get: string } }> {
  const form = new FormData();
  form.append('content', new Blob([content], { type: 'application/jsonl' }), name);
  const res = await fetch(`${API_URL}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
  expect(res.status).toBe(201);
  return (await res.json()) as { id: string; urls: { get: string } };
}

test('inline inputs: one line per input, in input order, with item errors, a retried chunk and continue-as-new', async () => {
  const inputs = Array.from({ length: 23 }, (_, i) => ({ text: `item ${i}`, sleep_ms: 10 }));
  inputs[5] = { text: 'refused', sleep_ms: 0, error: 'no thanks' } as (typeof inputs)[number];
  // A fault on the first attempt: the chunk fails, and the next attempt resumes at this item.
  inputs[13] = { text: 'item 13', sleep_ms: 0, fail_attempts: 1 } as (typeof inputs)[number];
  const created = await api('/v1/batches', { token: alice, body: { version: 'kiln/echo-fixture', inputs, chunk_size: 3 } });
  expect(created.status).toBe(201);
  expect(created.body).toMatchObject({ model: 'kiln/echo-fixture', total: 23, chunk_size: 3, source: 'inline' });
  // The workflow may have written its first transition before the API read the row back.
  expect(['starting', 'processing']).toContain(created.body.status);
  expect(created.body.urls.get).toBe(`${API_URL}/v1/batches/${created.body.id}`);

  const done = await finished(created.body.id);
  expect(done.status).toBe('succeeded');
  expect(done).toMatchObject({ total: 23, completed: 22, failed: 1, error: null });
  expect(done.started_at).not.toBeNull();
  expect(done.completed_at).not.toBeNull();
  expect(done.logs).toMatch(
    /Chunk 4 \(items 12–14\) attempt 1 failed on node .*EngineFault: echo fixture: injected fault.*; resuming from item 13 \(1 of 3 done\)/,
  );

  const lines = await results(done);
  expect(lines.map((l) => l.index)).toEqual([...Array(23).keys()]);
  for (const l of lines) {
    if (l.index === 5) expect(l).toEqual({ index: 5, error: 'ModelError: echo fixture: no thanks' });
    else expect(l).toEqual({ index: l.index, output: `item ${l.index}` });
  }
  expect(done.output_file).toMatchObject({ id: expect.any(String), content_type: 'application/jsonl' });
  expect(done.output_file.size).toBeGreaterThan(0);
  expect(done.urls.output).toBe(done.output_file.urls.get);

  // Eight chunks, four per run: the workflow continued as new, and the Temporal UI can find it.
  const runs = [];
  for await (const w of temporal.client.workflow.list({ query: `WorkflowId = "${batchWorkflowId(done.id)}"` })) runs.push(w);
  expect(runs.length).toBeGreaterThanOrEqual(2);
  expect(runs.map((r) => r.status.name).sort()).toEqual(expect.arrayContaining(['COMPLETED', 'CONTINUED_AS_NEW']));
  const latest = await temporal.client.workflow.getHandle(batchWorkflowId(done.id)).describe();
  expect(latest.typedSearchAttributes.get(KilnStatus)).toBe('succeeded');
  expect(latest.memo).toMatchObject({ kind: 'batch', total: 23, completed: 22, failed: 1 });
});

test('a JSONL file uploaded with POST /v1/files, and the same file by URL', async () => {
  const jsonl = Array.from({ length: 7 }, (_, i) => JSON.stringify({ text: `line ${i}` })).join('\n') + '\n\n';
  const file = await upload(alice, 'inputs.jsonl', jsonl);

  const byId = await api('/v1/batches', { token: alice, body: { version: 'kiln/echo-fixture', input_file: file.id, chunk_size: 4 } });
  expect(byId.status).toBe(201);
  expect(byId.body).toMatchObject({ total: 7, source: `file:${file.id}` });
  const byUrl = await api('/v1/batches', { token: alice, body: { version: 'kiln/echo-fixture', input_url: file.urls.get } });
  expect(byUrl.status).toBe(201);
  expect(byUrl.body.total).toBe(7);

  for (const id of [byId.body.id, byUrl.body.id]) {
    const done = await finished(id);
    expect(done).toMatchObject({ status: 'succeeded', completed: 7, failed: 0 });
    expect(await results(done)).toEqual(Array.from({ length: 7 }, (_, i) => ({ index: i, output: `line ${i}` })));
  }
});

test('text generation on kiln/tiny-llama', async () => {
  const inputs = ['The kiln', 'Once upon', 'Fire'].map((prompt, i) => ({ prompt, max_tokens: 4, seed: i }));
  const created = await api('/v1/batches', { token: alice, body: { version: 'kiln/tiny-llama', inputs, chunk_size: 2 } });
  expect(created.status).toBe(201);
  const done = await finished(created.body.id);
  expect(done).toMatchObject({ status: 'succeeded', completed: 3, failed: 0 });
  const lines = await results(done);
  expect(lines.map((l) => l.index)).toEqual([0, 1, 2]);
  for (const l of lines) {
    expect(Array.isArray(l.output)).toBe(true);
    expect((l.output as string[]).length).toBeGreaterThan(0);
  }
});

test('every input is validated before anything starts: 422 naming inputs[i].field', async () => {
  const bad = await api('/v1/batches', {
    token: alice,
    body: {
      version: 'kiln/tiny-llama',
      inputs: [{ prompt: 'ok' }, { prompt: 'ok', max_tokens: 0 }, { prompt: 'x', bogus: 1 }, { max_tokens: 3 }, 'text'],
    },
  });
  expect(bad.status).toBe(422);
  const fields = bad.body.invalid_fields.map((f: { field: string }) => f.field);
  expect(fields).toEqual(expect.arrayContaining(['inputs[1].max_tokens', 'inputs[2].bogus', 'inputs[3].prompt', 'inputs[4]']));
  expect(fields).not.toContain('inputs[0].prompt');

  const file = await upload(alice, 'bad.jsonl', '{"text": "a"}\nnot json\n{"text": 3}\n');
  const badFile = await api('/v1/batches', { token: alice, body: { version: 'kiln/echo-fixture', input_file: file.id } });
  expect(badFile.status).toBe(422);
  expect(badFile.body.invalid_fields).toEqual([
    expect.objectContaining({ field: 'inputs[1]', description: expect.stringContaining('line 2') }),
  ]);

  const noSource = await api('/v1/batches', { token: alice, body: { version: 'kiln/echo-fixture' } });
  expect(noSource.status).toBe(422);
  expect(noSource.body.invalid_fields[0].field).toBe('inputs');
  const twoSources = await api('/v1/batches', { token: alice, body: { version: 'kiln/echo-fixture', inputs: [{}], input_file: file.id } });
  expect(twoSources.status).toBe(422);
  const noModel = await api('/v1/batches', { token: alice, body: { version: 'nobody/nothing', inputs: [{}] } });
  expect(noModel.status).toBe(422);
  expect(noModel.body.invalid_fields[0].field).toBe('version');
  // Another account's file is not yours to read.
  const theirs = await api('/v1/batches', { token: bob, body: { version: 'kiln/echo-fixture', input_file: file.id } });
  expect(theirs.status).toBe(422);
  expect(theirs.body.invalid_fields[0].field).toBe('input_file');

  const list = await api('/v1/batches', { token: alice });
  expect(list.body.results.some((b: { source: string }) => b.source === `file:${file.id}`)).toBe(false);
});

test("another account's batch is 404, and its list is its own", async () => {
  const created = await api('/v1/batches', { token: alice, body: { version: 'kiln/echo-fixture', inputs: [{ text: 'mine' }] } });
  expect(created.status).toBe(201);
  expect((await api(`/v1/batches/${created.body.id}`, { token: bob })).status).toBe(404);
  expect((await api(`/v1/batches/${created.body.id}/cancel`, { token: bob, method: 'POST' })).status).toBe(404);
  expect((await api('/v1/batches/nosuchbatch', { token: alice })).status).toBe(404);
  const bobs = await api('/v1/batches', { token: bob });
  expect(bobs.body.results.map((b: { id: string }) => b.id)).not.toContain(created.body.id);
  expect((await finished(created.body.id)).status).toBe('succeeded');
});

test('cancel: the batch stops, and the output holds the items finished before, once each, in order', async () => {
  const inputs = Array.from({ length: 30 }, (_, i) => ({ text: `slow ${i}`, sleep_ms: 300 }));
  const created = await api('/v1/batches', { token: alice, body: { version: 'kiln/echo-fixture', inputs, chunk_size: 3 } });
  expect(created.status).toBe(201);
  const id = created.body.id;
  await poll(
    () => api(`/v1/batches/${id}`, { token: alice }),
    (r) => r.body.completed >= 3,
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  const canceled = await api(`/v1/batches/${id}/cancel`, { token: alice, method: 'POST' });
  expect(canceled.status).toBe(200);
  const done = await finished(id);
  expect(done.status).toBe('canceled');
  expect(done.completed).toBeGreaterThanOrEqual(3);
  expect(done.completed).toBeLessThan(30);
  const lines = await results(done);
  expect(lines.length).toBe(done.completed);
  const indexes = lines.map((l) => l.index);
  expect(indexes).toEqual([...indexes].sort((a, b) => a - b));
  expect(new Set(indexes).size).toBe(indexes.length);
  for (const l of lines) expect(l.output).toBe(`slow ${l.index}`);
});

test('GET /v1/batches pages with a cursor, newest first', async () => {
  const { token } = await newAccount(db, 'batch-pages');
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await api('/v1/batches', { token, body: { version: 'kiln/echo-fixture', inputs: [{ text: `p${i}` }] } });
    ids.push(r.body.id);
  }
  const first = await api('/v1/batches?page_size=2', { token });
  expect(first.body.results.map((b: { id: string }) => b.id)).toEqual([ids[2], ids[1]]);
  expect(first.body.next).toMatch(/cursor=/);
  const second = await api(first.body.next.replace(API_URL, ''), { token });
  expect(second.body.results.map((b: { id: string }) => b.id)).toEqual([ids[0]]);
  expect(second.body.next).toBeNull();
  expect((await api('/v1/batches?cursor=garbage', { token })).status).toBe(422);
});
