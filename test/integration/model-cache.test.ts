/**
 * The model cache against the suite's MinIO: a big file comes down in parallel ranged parts,
 * lands byte for byte, resumes after an abort without fetching finished parts again, and never
 * keeps bytes that fail the digest.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { ModelCache } from '../../engines/model-cache';
import { config } from '../../lib/config';
import { blobKey, Storage } from '../../lib/storage';

jest.setTimeout(60_000);

const MiB = 2 ** 20;
const PART = MiB;
const storage = Storage.fromConfig(config());
let dir: string;
let blob: Buffer;
let file: { path: string; sha256: string; size: number };

beforeAll(async () => {
  await storage.ensureBucket();
  // Not a whole number of parts, so the last one is short.
  blob = randomBytes(24 * MiB + 12_345);
  file = { path: 'model.gguf', sha256: createHash('sha256').update(blob).digest('hex'), size: blob.length };
  await storage.putStream(blobKey(file.sha256), Readable.from([blob]));
});
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-cache-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterAll(async () => {
  await storage.delete(blobKey(file.sha256));
  storage.client.destroy();
});

const cacheIn = (d: string) => new ModelCache(d, storage, { rangedMinBytes: 4 * MiB, streams: 4, partBytes: PART });

test('a big file comes down in parallel parts, byte for byte, and reports its progress', async () => {
  const seen: number[] = [];
  const got = await cacheIn(dir).ensure(file, { onProgress: (p) => seen.push(p.bytes) });
  expect(got.downloadedBytes).toBe(file.size);
  expect((await readFile(got.path)).equals(blob)).toBe(true);
  expect(seen.at(-1)).toBe(file.size);
  expect(existsSync(`${got.path}.partial.parts.json`)).toBe(false);
  // Cached: nothing is fetched again, until the cache forgets it.
  expect((await cacheIn(dir).ensure(file)).downloadedBytes).toBe(0);
  await cacheIn(dir).forget(file.sha256);
  expect(existsSync(got.path)).toBe(false);
});

/** Starts the download and aborts it, as a node going down would, once `bytes` have arrived. */
async function abortedAt(cache: ModelCache, bytes: number): Promise<void> {
  const abort = new AbortController();
  await expect(
    cache.ensure(file, {
      signal: abort.signal,
      onProgress: (p) => {
        if (p.bytes >= bytes) abort.abort(new Error('node going down'));
      },
    }),
  ).rejects.toThrow('node going down');
}

test('aborted halfway, it resumes with the parts it had and still lands the right bytes', async () => {
  const cache = cacheIn(dir);
  // Past 10 MiB received, at least 6 whole parts are done: at most 4 are in flight.
  await abortedAt(cache, 10 * MiB);
  const record = JSON.parse(await readFile(`${cache.pathFor(file.sha256)}.partial.parts.json`, 'utf8'));
  expect(record.done.length).toBeGreaterThanOrEqual(6);
  expect(record.done.length).toBeLessThan(25);

  // A new process (a new cache object) picks it up where the record says.
  const resumed = await cacheIn(dir).ensure(file);
  expect(resumed.downloadedBytes).toBe(file.size - record.done.length * PART);
  expect((await readFile(resumed.path)).equals(blob)).toBe(true);
});

test('a resumed download with a damaged part starts over, and the next attempt is right', async () => {
  const cache = cacheIn(dir);
  await abortedAt(cache, 8 * MiB);
  const partial = `${cache.pathFor(file.sha256)}.partial`;
  const record = JSON.parse(await readFile(`${partial}.parts.json`, 'utf8'));
  // Flip the bytes of a part the record calls done, as a crash of the disk might.
  const bytes = await readFile(partial);
  bytes.fill(0, record.done[0] * PART, record.done[0] * PART + 100);
  await writeFile(partial, bytes);

  await expect(cacheIn(dir).ensure(file)).rejects.toThrow(/retrying from scratch/);
  expect(existsSync(partial)).toBe(false);
  const fresh = await cacheIn(dir).ensure(file);
  expect(fresh.downloadedBytes).toBe(file.size);
  expect((await readFile(fresh.path)).equals(blob)).toBe(true);
});

test('a blob whose bytes do not match its digest fails for good, and nothing is kept', async () => {
  const wrong = { ...file, sha256: createHash('sha256').update('not these bytes').digest('hex') };
  await storage.putStream(blobKey(wrong.sha256), Readable.from([blob]));
  try {
    const cache = cacheIn(dir);
    await expect(cache.ensure(wrong)).rejects.toMatchObject({ type: 'ModelFileCorrupt' });
    expect(existsSync(cache.pathFor(wrong.sha256))).toBe(false);
    expect(existsSync(`${cache.pathFor(wrong.sha256)}.partial`)).toBe(false);
  } finally {
    await storage.delete(blobKey(wrong.sha256));
  }
});

test('a partial left by a one-stream download is picked up as a prefix', async () => {
  const cache = cacheIn(dir);
  const partial = `${cache.pathFor(file.sha256)}.partial`;
  await mkdir(path.dirname(partial), { recursive: true });
  await writeFile(partial, blob.subarray(0, 5 * PART + 10));
  const got = await cache.ensure(file);
  expect(got.downloadedBytes).toBe(file.size - 5 * PART);
  expect((await readFile(got.path)).equals(blob)).toBe(true);
});
