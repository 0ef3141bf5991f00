/** Replicate's files API: multipart upload, signed expiring URLs, per-account isolation. */
import { closeDb, type Db } from '../../db/client';
import { API_URL, api, newAccount, testDb } from '../helpers';

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
  const file = (await res.json()) as {
    id: string;
    size: number;
    name: string;
    content_type: string;
    urls: { get: string };
    checksums: { sha256: string };
  };
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

describe('uploaded bytes are never rendered on the API origin', () => {
  const active: [string, string][] = [
    ['text/html', '<!doctype html><script>fetch("/x?" + localStorage.getItem("kiln.token"))</script>'],
    ['image/svg+xml', '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.domain)</script></svg>'],
    ['application/xhtml+xml', '<html xmlns="http://www.w3.org/1999/xhtml"><script>alert(1)</script></html>'],
    ['text/xml', '<?xml version="1.0"?><x:script xmlns:x="http://www.w3.org/1999/xhtml">alert(1)</x:script>'],
    ['text/javascript', 'alert(document.cookie)'],
  ];

  test.each(active)('%s: an attachment, as application/octet-stream, with nosniff and a sandboxing CSP', async (type, body) => {
    const res = await upload(token, new Blob([body], { type }), 'page.html');
    expect(res.status).toBe(201);
    const file = (await res.json()) as { content_type: string; urls: { get: string } };
    // What the uploader declared stays on record; it is just never echoed to a browser.
    expect(file.content_type).toBe(type);
    const content = await fetch(file.urls.get);
    expect(content.status).toBe(200);
    expect(content.headers.get('content-type')).toBe('application/octet-stream');
    expect(content.headers.get('x-content-type-options')).toBe('nosniff');
    expect(content.headers.get('content-disposition')).toMatch(/^attachment; filename="?page\.html"?$/);
    expect(content.headers.get('content-security-policy')).toBe("default-src 'none'; sandbox");
    // The signed URL is the capability: another site may embed it, as Replicate's outputs are embedded.
    expect(content.headers.get('cross-origin-resource-policy')).toBe('cross-origin');
    expect(await content.text()).toBe(body);
  });

  test('a passive type keeps its content type, still as an attachment; an odd file name is encoded, not echoed', async () => {
    const png = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');
    const res = await upload(token, new Blob([png], { type: 'image/png' }), 'résumé "1".png');
    const file = (await res.json()) as { urls: { get: string } };
    const content = await fetch(file.urls.get);
    expect(content.headers.get('content-type')).toBe('image/png');
    const disposition = content.headers.get('content-disposition')!;
    expect(disposition).toMatch(/^attachment; filename="[\x20-\x7e]*"; filename\*=UTF-8''[\w%.!~*'()-]+$/);
    expect(disposition).toContain("filename*=UTF-8''r%C3%A9sum%C3%A9%20");
    expect(Buffer.from(await content.arrayBuffer())).toEqual(png);
    // The owner's bearer token reads the same bytes with the same headers.
    const bare = file.urls.get.replace(/\?.*$/, '');
    const owned = await fetch(bare, { headers: { authorization: `Bearer ${token}` } });
    expect(owned.headers.get('content-disposition')).toBe(disposition);
    expect(owned.headers.get('content-security-policy')).toBe("default-src 'none'; sandbox");
  });
});

test('bidi and control characters are cleaned from file names, stored and served', async () => {
  // U+202E turns "report<RLO>fdp.exe" into "reportexe.pdf" on screen. Raw control characters in a
  // part's header are refused as malformed; RFC 5987's filename* carries them, so it is used here.
  const boundary = 'kiln-bidi-boundary';
  const name = encodeURIComponent('report\u202Efdp.exe\u2066\u200F\u0007\n');
  const body = [
    `--${boundary}`,
    `Content-Disposition: form-data; name="content"; filename*=UTF-8''${name}`,
    'Content-Type: application/octet-stream',
    '',
    'MZ',
    `--${boundary}--`,
    '',
  ].join('\r\n');
  const res = await fetch(`${API_URL}/v1/files`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
    body,
  });
  expect(res.status).toBe(201);
  const file = (await res.json()) as { id: string; name: string; urls: { get: string } };
  expect(file.name).toBe('reportfdp.exe');
  expect((await api(`/v1/files/${file.id}`, { token })).body.name).toBe('reportfdp.exe');
  const disposition = (await fetch(file.urls.get)).headers.get('content-disposition')!;
  expect(disposition).toMatch(/^attachment; filename="?reportfdp\.exe"?$/);
});
