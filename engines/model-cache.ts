/**
 * The engine node's local, content-addressed copy of model weights. A file lands under its
 * sha256 only after its digest was checked; a partial download resumes with ranged GETs. Big
 * files come down in parts, several ranged GETs at once, each written at its offset.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { type FileHandle, mkdir, open, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { VersionFile } from '../domain/statuses';
import { byteMeter } from '../lib/byte-meter';
import { blobKey, type Storage } from '../lib/storage';
import { EngineError } from './engine-error';
import { FileHasher } from './file-hasher';

export interface CacheProgress {
  file: string;
  bytes: number;
  total: number;
}

export interface CachedFile {
  path: string;
  downloadedBytes: number;
}

export interface ModelCacheOptions {
  /** Files bigger than this are fetched in parts (one GET stream cannot fill the link). */
  rangedMinBytes: number;
  /** Ranged GETs in flight at once for one file. */
  streams: number;
  /**
   * Size of one part. Small enough that a crash loses little (at most `streams` parts), big
   * enough that a request's own cost is lost in its transfer time.
   */
  partBytes?: number;
}

type EnsureOptions = { signal?: AbortSignal; onProgress?: (p: CacheProgress) => void };

/** What a parted download has finished, beside the partial file, so that a restart skips it. */
interface PartsRecord {
  size: number;
  partBytes: number;
  done: number[];
}

const DEFAULT_PART_BYTES = 32 * 2 ** 20;
const WRITE_BYTES = 2 ** 20;

async function sizeOf(file: string): Promise<number | undefined> {
  try {
    return (await stat(file)).size;
  } catch {
    return undefined;
  }
}

async function hashInto(hash: Hash, file: string): Promise<void> {
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
}

async function readParts(file: string): Promise<PartsRecord | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as PartsRecord;
  } catch {
    return undefined;
  }
}

/** The record is replaced whole (write, then rename), so a crash never leaves half of one. */
async function writeParts(file: string, record: PartsRecord): Promise<void> {
  await writeFile(`${file}.tmp`, JSON.stringify(record));
  await rename(`${file}.tmp`, file);
}

export class ModelCache {
  private inFlight = new Map<string, Promise<CachedFile>>();
  private opts: Required<ModelCacheOptions>;

  constructor(
    readonly dir: string,
    private storage: Storage,
    opts: ModelCacheOptions = { rangedMinBytes: Number.POSITIVE_INFINITY, streams: 1 },
  ) {
    this.opts = { partBytes: DEFAULT_PART_BYTES, ...opts };
  }

  pathFor(sha256: string): string {
    return path.join(this.dir, 'sha256', sha256);
  }

  /** Drops a blob from this cache, finished or partial, so the next ensure downloads it again. */
  async forget(sha256: string): Promise<void> {
    await unlink(this.pathFor(sha256)).catch(() => undefined);
    await this.discard(`${this.pathFor(sha256)}.partial`);
  }

  async has(file: VersionFile): Promise<boolean> {
    return (await sizeOf(this.pathFor(file.sha256))) === file.size;
  }

  /** The local path of the file, downloading it first if needed. Concurrent calls share one download. */
  ensure(file: VersionFile, opts: EnsureOptions = {}): Promise<CachedFile> {
    let pending = this.inFlight.get(file.sha256);
    if (!pending) {
      pending = this.fetch(file, opts).finally(() => this.inFlight.delete(file.sha256));
      this.inFlight.set(file.sha256, pending);
    }
    return pending;
  }

  private async fetch(file: VersionFile, opts: EnsureOptions): Promise<CachedFile> {
    const target = this.pathFor(file.sha256);
    if (await this.has(file)) return { path: target, downloadedBytes: 0 };
    await mkdir(path.dirname(target), { recursive: true });
    if (file.size > this.opts.rangedMinBytes && this.opts.streams > 1) return this.fetchInParts(file, target, opts);
    const partial = `${target}.partial`;
    // A parted download's file has holes: only its own record says what is there.
    if (await readParts(`${partial}.parts.json`)) await this.discard(partial);
    let start = (await sizeOf(partial)) ?? 0;
    if (start > file.size) {
      await unlink(partial);
      start = 0;
    }
    const hash = createHash('sha256');
    if (start > 0) await hashInto(hash, partial);
    let bytes = start;
    if (start < file.size) {
      const body = await this.storage.read(blobKey(file.sha256), { start, signal: opts.signal });
      const meter = byteMeter((chunk) => {
        hash.update(chunk);
        bytes += chunk.length;
        opts.onProgress?.({ file: file.path, bytes, total: file.size });
      });
      await pipeline(body, meter, createWriteStream(partial, { flags: start > 0 ? 'a' : 'w' }), { signal: opts.signal });
    }
    await this.verify(file, partial, hash.digest('hex'), bytes, start > 0);
    await rename(partial, target);
    return { path: target, downloadedBytes: bytes - start };
  }

  /**
   * `streams` ranged GETs at once, each writing its part at its offset. The hash runs alongside,
   * on its own thread: parts are read back in order as soon as the ones before them are done, so
   * the digest is ready moments after the last byte. Finished parts are recorded beside the file.
   */
  private async fetchInParts(file: VersionFile, target: string, opts: EnsureOptions): Promise<CachedFile> {
    const partial = `${target}.partial`;
    const recordFile = `${partial}.parts.json`;
    const { partBytes, streams } = this.opts;
    const count = Math.ceil(file.size / partBytes);
    const bounds = (i: number) => ({ start: i * partBytes, end: Math.min(file.size, (i + 1) * partBytes) });

    const done = await partsOnDisk(partial, recordFile, file.size, partBytes);
    const resumed = done.size > 0;
    const save = () => writeParts(recordFile, { size: file.size, partBytes, done: [...done].sort((a, b) => a - b) });
    // The record exists before the first positioned write: a partial without one is always a prefix.
    await save();
    const fh = await open(partial, resumed ? 'r+' : 'w+');

    const abort = new AbortController();
    const stop = () => abort.abort(opts.signal?.reason);
    if (opts.signal?.aborted) stop();
    opts.signal?.addEventListener('abort', stop, { once: true });

    let received = [...done].reduce((n, i) => n + bounds(i).end - bounds(i).start, 0);
    let downloaded = 0;
    const hasher = new FileHasher(partial);
    let hashedParts = 0;
    const hashReady = () => {
      for (; hashedParts < count && done.has(hashedParts); hashedParts++) hasher.add(bounds(hashedParts).start, bounds(hashedParts).end);
    };
    let saving = Promise.resolve();
    const todo = Array.from({ length: count }, (_, i) => i).filter((i) => !done.has(i));
    let next = 0;

    const fetchPart = async (i: number) => {
      const { start, end } = bounds(i);
      const body = await this.storage.read(blobKey(file.sha256), { start, end, signal: abort.signal });
      await writePart(body as AsyncIterable<Buffer>, fh, { start, end, signal: abort.signal, what: `${file.path}: part ${i}` }, (n) => {
        received += n;
        downloaded += n;
        opts.onProgress?.({ file: file.path, bytes: received, total: file.size });
      });
      done.add(i);
      saving = saving.then(save);
      await saving;
      hashReady();
    };
    const worker = async () => {
      while (next < todo.length) await fetchPart(todo[next++]);
    };

    hashReady();
    const results = await Promise.allSettled(
      Array.from({ length: Math.min(streams, todo.length) }, () =>
        worker().catch((err: unknown) => {
          // One part failing stops the others; what they finished stays recorded.
          abort.abort(err);
          throw err;
        }),
      ),
    );
    opts.signal?.removeEventListener('abort', stop);
    await saving.catch(() => undefined);
    await fh.close();
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      await hasher.close();
      throw opts.signal?.aborted ? (opts.signal.reason ?? failed.reason) : failed.reason;
    }
    const digest = hashedParts === count ? await hasher.digest() : (await hasher.close(), 'incomplete');
    await this.verify(file, partial, digest, received, resumed);
    await rename(partial, target);
    await unlink(recordFile).catch(() => undefined);
    return { path: target, downloadedBytes: downloaded };
  }

  private async verify(file: VersionFile, partial: string, digest: string, bytes: number, resumed: boolean): Promise<void> {
    if (digest === file.sha256 && bytes === file.size) return;
    await this.discard(partial);
    const detail = `${file.path}: expected sha256 ${file.sha256} (${file.size} B), got ${digest} (${bytes} B)`;
    // A resumed download may have kept bad bytes: start over. A fresh one means the blob is bad.
    if (resumed) throw new Error(`${detail}; retrying from scratch`);
    throw new EngineError('ModelFileCorrupt', detail);
  }

  private async discard(partial: string): Promise<void> {
    await unlink(partial).catch(() => undefined);
    await unlink(`${partial}.parts.json`).catch(() => undefined);
  }
}

/**
 * The parts of a partial download already on disk: those its record lists, or, for a partial left
 * by a one-stream download (a plain prefix, with no record), every part inside it.
 */
async function partsOnDisk(partial: string, recordFile: string, size: number, partBytes: number): Promise<Set<number>> {
  const count = Math.ceil(size / partBytes);
  const done = new Set<number>();
  const record = await readParts(recordFile);
  const partialSize = await sizeOf(partial);
  if (partialSize !== undefined && record?.size === size && record.partBytes === partBytes) {
    for (const i of record.done) if (i >= 0 && i < count) done.add(i);
  } else if (partialSize !== undefined && !record && partialSize <= size) {
    for (let i = 0; i < count && Math.min(size, (i + 1) * partBytes) <= partialSize; i++) done.add(i);
  }
  return done;
}

/**
 * Writes one part's body at its offset, checking that it fills exactly `start` to `end`.
 * Chunks arrive at socket size (tens of KiB): gathered into writes of about a MiB, the thread pool
 * does far fewer round trips. `wrote` hears each write's byte count.
 */
async function writePart(
  body: AsyncIterable<Buffer>,
  fh: FileHandle,
  part: { start: number; end: number; signal: AbortSignal; what: string },
  wrote: (bytes: number) => void,
): Promise<void> {
  let at = part.start;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  const flush = async () => {
    await fh.writev(pending, at);
    at += pendingBytes;
    wrote(pendingBytes);
    pending = [];
    pendingBytes = 0;
  };
  for await (const chunk of body) {
    part.signal.throwIfAborted();
    if (at + pendingBytes + chunk.length > part.end) throw new Error(`${part.what} is longer than asked for`);
    pending.push(chunk);
    pendingBytes += chunk.length;
    if (pendingBytes >= WRITE_BYTES) await flush();
  }
  if (pendingBytes > 0) await flush();
  if (at !== part.end) throw new Error(`${part.what} ended at ${at}, not ${part.end}`);
}
