/** The hub download's answers to servers that do not go by the book: no range, too many bytes, no sha256, no access. */
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { downloadHubFile, headHubFile } from '../../cli/hub-download';

const bytes = Buffer.from('GGUF'.repeat(5000));
const sha256 = createHash('sha256').update(bytes).digest('hex');
let dir: string;
let server: http.Server;
let url: string;
let handler: (req: http.IncomingMessage, res: http.ServerResponse) => void;
const ranges: Array<string | undefined> = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-hub-download-'));
  server = http.createServer((req, res) => {
    ranges.push(req.headers.range);
    handler(req, res);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/o/r/resolve/main/m.gguf`;
});
afterEach(() => {
  ranges.length = 0;
});
afterAll(async () => {
  await new Promise((done) => server.close(done));
  await rm(dir, { recursive: true, force: true });
});

const options = (cacheDir: string) => ({ cacheDir, quiet: true, log: () => undefined });

test('a server that ignores the range sends the whole file, and the download starts again from its first byte', async () => {
  handler = (_req, res) => res.writeHead(200, { 'content-length': String(bytes.length) }).end(bytes);
  const cache = path.join(dir, 'no-range');
  await mkdir(cache, { recursive: true });
  await writeFile(path.join(cache, `${sha256}.partial`), Buffer.from('stale bytes from another run'));
  const file = await downloadHubFile({ url, sha256, size: bytes.length }, options(cache));
  expect(ranges).toEqual(['bytes=28-']);
  expect((await readFile(file)).equals(bytes)).toBe(true);
  expect(await readdir(cache)).toEqual(['sha256']);
});

test('more bytes than the hub announced are refused, and the partial file goes', async () => {
  handler = (_req, res) => res.writeHead(200).end(Buffer.concat([bytes, bytes]));
  const cache = path.join(dir, 'too-many');
  await expect(downloadHubFile({ url, sha256, size: bytes.length }, options(cache))).rejects.toThrow(
    `the hub sent more than the ${bytes.length} bytes it announced`,
  );
  expect(await readdir(cache)).toEqual(['sha256']);
});

test('a range that starts elsewhere than asked is refused', async () => {
  handler = (_req, res) => res.writeHead(206, { 'content-range': `bytes 0-${bytes.length - 1}/${bytes.length}` }).end(bytes);
  const cache = path.join(dir, 'wrong-range');
  await mkdir(cache, { recursive: true });
  await writeFile(path.join(cache, `${sha256}.partial`), bytes.subarray(0, 100));
  await expect(downloadHubFile({ url, sha256, size: bytes.length }, options(cache))).rejects.toThrow(
    `asked for bytes from 100, got bytes 0-${bytes.length - 1}/${bytes.length}`,
  );
});

test('HEAD: a file without a sha256 (not in LFS) and a refused token say what is wrong', async () => {
  handler = (_req, res) => res.writeHead(200, { etag: '"0123456789abcdef0123456789abcdef01234567"', 'content-length': '10' }).end();
  await expect(headHubFile(url)).rejects.toThrow('only LFS files can be pulled');
  handler = (_req, res) => res.writeHead(401).end();
  await expect(headHubFile(url)).rejects.toThrow('the hub refused access (a gated or private repository?): set HF_TOKEN');
  await expect(headHubFile(url, 'hf_x')).rejects.toThrow('does HF_TOKEN grant it?');
  handler = (_req, res) =>
    res.writeHead(302, { location: '/elsewhere', 'x-linked-etag': `"${sha256}"`, 'x-linked-size': String(bytes.length) }).end();
  expect(await headHubFile(url)).toEqual({ url, sha256, size: bytes.length, commit: undefined });
});
