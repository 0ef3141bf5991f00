/**
 * The engine node's local, content-addressed copy of model weights. A file lands under its
 * sha256 only after its digest was checked; a partial download resumes with a ranged GET.
 */
import { createHash, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rename, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { VersionFile } from '../db/schema';
import { byteMeter } from '../lib/byte-meter';
import { blobKey, type Storage } from '../lib/storage';
import { kilnFailure } from '../workflows/failures';

export interface CacheProgress {
  file: string;
  bytes: number;
  total: number;
}

export interface CachedFile {
  path: string;
  downloadedBytes: number;
}

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

export class ModelCache {
  private inFlight = new Map<string, Promise<CachedFile>>();

  constructor(
    readonly dir: string,
    private storage: Storage,
  ) {}

  pathFor(sha256: string): string {
    return path.join(this.dir, 'sha256', sha256);
  }

  async has(file: VersionFile): Promise<boolean> {
    return (await sizeOf(this.pathFor(file.sha256))) === file.size;
  }

  /** The local path of the file, downloading it first if needed. Concurrent calls share one download. */
  ensure(file: VersionFile, opts: { signal?: AbortSignal; onProgress?: (p: CacheProgress) => void } = {}): Promise<CachedFile> {
    let pending = this.inFlight.get(file.sha256);
    if (!pending) {
      pending = this.fetch(file, opts).finally(() => this.inFlight.delete(file.sha256));
      this.inFlight.set(file.sha256, pending);
    }
    return pending;
  }

  private async fetch(
    file: VersionFile,
    opts: { signal?: AbortSignal; onProgress?: (p: CacheProgress) => void },
  ): Promise<CachedFile> {
    const target = this.pathFor(file.sha256);
    if (await this.has(file)) return { path: target, downloadedBytes: 0 };
    await mkdir(path.dirname(target), { recursive: true });
    const partial = `${target}.partial`;
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
    const digest = hash.digest('hex');
    if (digest !== file.sha256 || bytes !== file.size) {
      await unlink(partial).catch(() => {});
      const detail = `${file.path}: expected sha256 ${file.sha256} (${file.size} B), got ${digest} (${bytes} B)`;
      // A resumed download may have kept a bad prefix: start over. A fresh one means the blob is bad.
      if (start > 0) throw new Error(`${detail}; retrying from scratch`);
      throw kilnFailure('ModelFileCorrupt', detail);
    }
    await rename(partial, target);
    return { path: target, downloadedBytes: bytes - start };
  }
}
