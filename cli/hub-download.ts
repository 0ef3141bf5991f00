/**
 * A file from a Hugging Face-style hub, by its download protocol: `HEAD` on the file's resolve URL
 * answers with the LFS object's sha256 (`x-linked-etag`), size (`x-linked-size`) and commit
 * (`x-repo-commit`), often on a redirect to a CDN; a `GET` with `Range` then fetches what the
 * download cache lacks. A partial file is kept where a download stops, so the next pull resumes it;
 * a finished file is checked against the sha256 before it takes its place in the cache.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, rm, stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { KilnError, messageOf } from '../lib/kiln-error';
import { byteBar } from './progress-bar';

export class HubError extends KilnError {}

export interface HubFile {
  /** The resolve URL the HEAD was sent to. */
  url: string;
  sha256: string;
  size: number;
  /** The commit the revision resolved to, where the hub says (`x-repo-commit`). */
  commit?: string;
}

const MAX_REDIRECTS = 10;
const SHA256 = /^[a-f0-9]{64}$/;

/** The sha256 an ETag carries, quotes and weak marker taken off. */
function sha256Of(etag: string | null): string | undefined {
  const value = etag?.replace(/^W\//, '').replace(/^"|"$/g, '').toLowerCase();
  return value && SHA256.test(value) ? value : undefined;
}

/**
 * One request that follows redirects itself: the token goes only to the hub's own origin, never to
 * the CDN a redirect names (its URL is signed).
 */
async function hubRequest(url: string, init: { method: 'HEAD' | 'GET'; token?: string; range?: string }) {
  const origin = new URL(url).origin;
  let at = url;
  for (let hops = 0; ; hops++) {
    const headers: Record<string, string> = {};
    if (init.token && new URL(at).origin === origin) headers.authorization = `Bearer ${init.token}`;
    if (init.range) headers.range = init.range;
    let res: Response;
    try {
      res = await fetch(at, { method: init.method, headers, redirect: 'manual' });
    } catch (err) {
      throw new HubError(`cannot reach ${new URL(at).origin} (${messageOf(err)})`, { cause: err });
    }
    const location = res.headers.get('location');
    if (res.status < 300 || res.status >= 400 || !location) return { res, url: at };
    if (hops >= MAX_REDIRECTS) throw new HubError(`${url}: more than ${MAX_REDIRECTS} redirects`);
    // The hub's answer to the HEAD carries the file's facts on the redirect itself.
    if (init.method === 'HEAD' && res.headers.has('x-linked-etag')) return { res, url: at };
    await res.body?.cancel();
    at = new URL(location, at).toString();
  }
}

function refusal(status: number, url: string, hasToken: boolean): HubError {
  if (status === 401 || status === 403)
    return new HubError(
      `${url}: ${status}, the hub refused access (a gated or private repository?)${hasToken ? ': does HF_TOKEN grant it?' : ': set HF_TOKEN'}`,
    );
  if (status === 404) return new HubError(`${url}: 404, no such repository, revision or file on the hub`);
  return new HubError(`${url}: the hub answered ${status}`);
}

/** The file's sha256, size and commit, from the hub's answer to a HEAD on its resolve URL. */
export async function headHubFile(url: string, token?: string): Promise<HubFile> {
  const { res } = await hubRequest(url, { method: 'HEAD', token });
  if (res.status >= 400) throw refusal(res.status, url, Boolean(token));
  const sha256 = sha256Of(res.headers.get('x-linked-etag')) ?? sha256Of(res.headers.get('etag'));
  if (!sha256)
    throw new HubError(`${url}: the hub gave no sha256 for the file (no x-linked-etag): only LFS files can be pulled and checked`);
  const size = Number(res.headers.get('x-linked-size') ?? res.headers.get('content-length'));
  if (!Number.isSafeInteger(size) || size <= 0) throw new HubError(`${url}: the hub gave no size for the file (no x-linked-size)`);
  return { url, sha256, size, commit: res.headers.get('x-repo-commit') ?? undefined };
}

export interface DownloadOptions {
  /** The download cache: `sha256/<digest>` once whole, `<digest>.partial` while it comes. */
  cacheDir: string;
  token?: string;
  quiet: boolean;
  log: (line: string) => void;
}

/** The hash of what a partial file holds, to go on from. */
async function hashOf(file: string): Promise<Hash> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file, { highWaterMark: 4 * 2 ** 20 })) hash.update(chunk as Buffer);
  return hash;
}

async function sizeOf(file: string): Promise<number | undefined> {
  return stat(file).then(
    (s) => s.size,
    () => undefined,
  );
}

/** Refuses a download the cache's disk cannot hold, before a byte of it comes. */
async function checkFreeSpace(dir: string, needed: number): Promise<void> {
  const fs = await statfs(dir);
  const free = fs.bavail * fs.bsize;
  if (needed > free)
    throw new HubError(
      `${dir} has ${(free / 2 ** 20).toFixed(0)} MiB free, and the rest of the download needs ${(needed / 2 ** 20).toFixed(0)} MiB`,
    );
}

/**
 * The file in the download cache, fetched (or resumed) and checked against the hub's sha256. A
 * download cut off keeps its partial file and says to run the pull again; bytes that do not hash
 * to the hub's sha256 are removed.
 */
export async function downloadHubFile(file: HubFile, opts: DownloadOptions): Promise<string> {
  const done = path.join(opts.cacheDir, 'sha256', file.sha256);
  const partial = path.join(opts.cacheDir, `${file.sha256}.partial`);
  await mkdir(path.dirname(done), { recursive: true });
  if ((await sizeOf(done)) === file.size) {
    opts.log(`already downloaded: ${done}`);
    return done;
  }
  let offset = (await sizeOf(partial)) ?? 0;
  if (offset > file.size) {
    await rm(partial, { force: true });
    offset = 0;
  }
  await checkFreeSpace(opts.cacheDir, file.size - offset);
  let hash = offset > 0 ? await hashOf(partial) : createHash('sha256');
  if (offset > 0) opts.log(`resuming at ${(offset / 2 ** 20).toFixed(1)} of ${(file.size / 2 ** 20).toFixed(1)} MiB`);
  let received = offset;
  let cutBy: unknown;
  if (offset < file.size) {
    const { res, url } = await hubRequest(file.url, { method: 'GET', token: opts.token, range: `bytes=${offset}-` });
    if (res.status >= 400) throw refusal(res.status, url, Boolean(opts.token));
    if (res.status === 200 && offset > 0) {
      // The server sent the whole file, not the range: start again from its first byte.
      opts.log('the server ignored the range: downloading from the start');
      offset = received = 0;
      hash = createHash('sha256');
    } else if (res.status === 206) {
      const start = /^bytes (\d+)-/.exec(res.headers.get('content-range') ?? '')?.[1];
      if (Number(start) !== offset) throw new HubError(`${url}: asked for bytes from ${offset}, got ${res.headers.get('content-range')}`);
    } else if (res.status !== 200) throw new HubError(`${url}: the hub answered ${res.status} to the download`);
    ({ received, cutBy } = await receive(res, { partial, offset, size: file.size, hash, quiet: opts.quiet }));
  }
  if (received < file.size) {
    throw new HubError(
      `the download stopped at ${received} of ${file.size} bytes${cutBy ? ` (${messageOf(cutBy)})` : ''}: run the same pull again to resume (${partial} is kept)`,
      { cause: cutBy },
    );
  }
  const actual = hash.digest('hex');
  if (actual !== file.sha256) {
    await rm(partial, { force: true });
    throw new HubError(`the downloaded bytes have sha256 ${actual}, not the hub's ${file.sha256}: removed them, nothing was pushed`);
  }
  await rename(partial, done);
  return done;
}

/** Appends the body to the partial file and hashes it; says how many bytes the file then holds, and what cut the body off. */
async function receive(
  res: Response,
  d: { partial: string; offset: number; size: number; hash: Hash; quiet: boolean },
): Promise<{ received: number; cutBy?: unknown }> {
  const out = await open(d.partial, d.offset > 0 ? 'a' : 'w');
  const progress = byteBar('download', d.size, d.quiet);
  let at = d.offset;
  progress.update(at);
  try {
    for await (const chunk of Readable.fromWeb(res.body! as never) as AsyncIterable<Buffer>) {
      if (at + chunk.length > d.size) throw new HubError(`the hub sent more than the ${d.size} bytes it announced`);
      await out.write(chunk);
      d.hash.update(chunk);
      at += chunk.length;
      progress.update(at);
    }
  } catch (err) {
    if (err instanceof HubError) {
      await rm(d.partial, { force: true });
      throw err;
    }
    // Cut off: what was written stays for the next pull to resume from.
    return { received: at, cutBy: err };
  } finally {
    progress.stop();
    await out.close();
  }
  return { received: at };
}
