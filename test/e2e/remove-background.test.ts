/**
 * @jest-environment ./test/native-typed-arrays-environment.js
 */
/** kiln/remove-background end to end: ONNX Runtime on the engine node, a transparent PNG out. */
import { closeDb, type Db } from '../../db/client';
import { loadSharp } from '../../engines/onnx/engine';
import { API_URL, api, newAccount, poll, testDb } from '../helpers';

jest.setTimeout(180_000);

let db: Db;
let token: string;
let disc: Buffer;
const [W, H] = [240, 160];

beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'cutout')).token;
  const sharp = await loadSharp();
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}"><rect width="100%" height="100%" fill="white"/><circle cx="120" cy="80" r="50" fill="#d01818"/></svg>`;
  disc = await sharp(Buffer.from(svg)).png().toBuffer();
});
afterAll(() => closeDb(db));

const cutout = (image: string) =>
  api('/v1/models/kiln/remove-background/predictions', { token, body: { input: { image } }, headers: { prefer: 'wait=60' } });

async function checkTransparentDisc(url: string) {
  expect(url).toMatch(/\/v1\/files\/[a-z2-7]{26}\/content\?expires=\d+&sig=/);
  const res = await fetch(url);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('image/png');
  const sharp = await loadSharp();
  const { data, info } = await sharp(Buffer.from(await res.arrayBuffer()))
    .raw()
    .toBuffer({ resolveWithObject: true });
  expect([info.width, info.height, info.channels]).toEqual([W, H, 4]);
  const alpha = (x: number, y: number) => data[(y * W + x) * 4 + 3];
  expect(alpha(120, 80)).toBeGreaterThan(200);
  expect(alpha(3, 3)).toBeLessThan(50);
}

test('a data URI in, a transparent PNG out, by signed URL', async () => {
  const r = await cutout(`data:image/png;base64,${disc.toString('base64')}`);
  expect(r.status).toBe(201);
  expect(r.body.status).toBe('succeeded');
  expect(r.body.metrics.image_count).toBe(1);
  expect(r.body.logs).toMatch(/Removed the background of 240×160/);
  await checkTransparentDisc(r.body.output);
});

test('an uploaded file as the input', async () => {
  const form = new FormData();
  form.append('content', new Blob([disc], { type: 'image/png' }), 'disc.png');
  const up = await fetch(`${API_URL}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
  const file = (await up.json()) as { urls: { get: string } };
  const r = await cutout(file.urls.get);
  expect(r.body.status).toBe('succeeded');
  await checkTransparentDisc(r.body.output);
});

test('not an image: the prediction fails with a clear error, and a bad URL is refused at once', async () => {
  const r = await cutout(`data:image/png;base64,${Buffer.from('no pixels here').toString('base64')}`);
  expect(r.body.status).toBe('failed');
  expect(r.body.error).toMatch(/could not be decoded/);
  const bad = await cutout('ftp://example.com/x.png');
  expect(bad.status).toBe(422);
  expect(bad.body.invalid_fields[0].field).toBe('input.image');
});

test('a batch of images: the output JSONL links each PNG (with the token: a stored file outlives signatures)', async () => {
  const inputs = [
    { image: `data:image/png;base64,${disc.toString('base64')}` },
    { image: `data:image/png;base64,${Buffer.from('nope').toString('base64')}` },
  ];
  const created = await api('/v1/batches', { token, body: { version: 'kiln/remove-background', inputs } });
  expect(created.status).toBe(201);
  const done = await poll(
    () => api(`/v1/batches/${created.body.id}`, { token }),
    (r) => ['succeeded', 'failed', 'canceled'].includes(r.body.status),
    {
      timeoutMs: 150_000,
      intervalMs: 500,
    },
  ).then((r) => r.body);
  expect(done).toMatchObject({ status: 'succeeded', completed: 1, failed: 1 });
  const lines = (await (await fetch(done.output_file.urls.get)).text())
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l));
  expect(lines[0].output).toMatch(new RegExp(`^${API_URL}/v1/files/[a-z2-7]{26}/content$`));
  expect(lines[1]).toEqual({ index: 1, error: expect.stringMatching(/^InvalidInput: .*could not be decoded/) });
  expect((await fetch(lines[0].output)).status).toBe(401);
  const png = await fetch(lines[0].output, { headers: { authorization: `Bearer ${token}` } });
  expect(png.status).toBe(200);
  expect(png.headers.get('content-type')).toBe('image/png');
});
