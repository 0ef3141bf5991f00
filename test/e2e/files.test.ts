/** Replicate's files API: multipart upload, signed expiring URLs, per-account isolation. */
import { closeDb, type Db } from '../../db/client';
import { api, API_URL, newAccount, testDb } from '../helpers';

let db: Db;
let token: string;
let other: string;
beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'files')).token;
  other = (await newAccount(db, 'files-other')).token;
});
afterAll(() => closeDb(db));

const upload = (t: string, content: Blob, filename = 'hello.txt') => {
  const form = new FormData();
  form.append('content', content, filename);
  return fetch(`${API_URL}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${t}` }, body: form });
};

test('upload, read back through the signed URL without a token, list, delete', async () => {
  const res = await upload(token, new Blob(['hello kiln'], { type: 'text/plain' }));
  expect(res.status).toBe(201);
  const file = (await res.json()) as { id: string; size: number; name: string; content_type: string; urls: { get: string }; checksums: { sha256: string } };
  expect(file).toMatchObject({ name: 'hello.txt', content_type: 'text/plain', size: 10 });
  expect(file.checksums.sha256).toMatch(/^[a-f0-9]{64}$/);
  const content = await fetch(file.urls.get);
  expect(content.status).toBe(200);
  expect(await content.text()).toBe('hello kiln');
  // A tampered or unsigned link needs the owner's token.
  const bare = file.urls.get.replace(/\?.*$/, '');
  expect((await fetch(`${bare}?expires=9999999999&sig=forged`)).status).toBe(401);
  expect((await fetch(bare, { headers: { authorization: `Bearer ${other}` } })).status).toBe(404);
  expect((await fetch(bare, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
  expect((await api(`/v1/files/${file.id}`, { token: other })).status).toBe(404);
  const list = await api('/v1/files', { token });
  expect(list.body.results.map((f: { id: string }) => f.id)).toContain(file.id);
  expect((await api(`/v1/files/${file.id}`, { token, method: 'DELETE' })).status).toBe(204);
  expect((await api(`/v1/files/${file.id}`, { token })).status).toBe(404);
});

test('a request that is not multipart, or has no content field, is a 400', async () => {
  expect((await api('/v1/files', { token, body: { content: 'x' } })).status).toBe(400);
  const form = new FormData();
  form.append('other', new Blob(['x']), 'x.txt');
  const r = await fetch(`${API_URL}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
  expect(r.status).toBe(400);
  expect(((await r.json()) as { detail: string }).detail).toMatch(/content/);
});
