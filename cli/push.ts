/**
 * `kiln push owner/name file...` (`--lora-for owner/base` for a LoRA adapter): hashes each file
 * (unless its sha256 is known, as a pull's checked download's is), uploads the blobs the server
 * lacks (streamed, with a progress bar), and creates a version. The server works out the version's memory need
 * from the stored weights (api/version-resources.ts), so the CLI sends none of its own.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { SpeculativeSetting } from '../api/draft-model';
import { byteMeter } from '../lib/byte-meter';
import { sha256OfFile } from '../lib/file-sha256';
import { type ApiContext, request } from './client';
import { byteBar as bar } from './progress-bar';

async function sha256Of(file: string, size: number, quiet: boolean): Promise<string> {
  const progress = bar('hashing', size, quiet);
  const sha256 = await sha256OfFile(file, (done) => progress.update(done));
  progress.stop();
  return sha256;
}

/** A file to push: its path, the name the version gives it and, where already checked, its sha256. */
export interface LocalFile {
  file: string;
  name: string;
  sha256?: string;
}

export async function push(
  ctx: ApiContext,
  ref: string,
  files: Array<string | LocalFile>,
  opts: {
    quiet: boolean;
    settings?: { sequences?: number; idleTtlSeconds?: number; contextSize?: number; speculative?: SpeculativeSetting };
    retry?: { max_attempts: number; initial_interval_s?: number; backoff?: number };
    /** The base version (`owner/name[:version]`) this version is a LoRA adapter of. */
    loraFor?: string;
  },
) {
  const manifest = [];
  for (const entry of files) {
    const { file, name, sha256: known } = typeof entry === 'string' ? { file: entry, name: path.basename(entry) } : entry;
    const { size } = await stat(file);
    const sha256 = known ?? (await sha256Of(file, size, opts.quiet));
    const exists = await fetch(`${ctx.url}/v1/blobs/sha256/${sha256}`, {
      method: 'HEAD',
      headers: { authorization: `Bearer ${ctx.token}` },
    });
    if (exists.status === 200) {
      if (!opts.quiet) console.log(`${name}: already stored (sha256 ${sha256.slice(0, 12)}…)`);
    } else {
      const progress = bar('uploading', size, opts.quiet);
      let sent = 0;
      const meter = byteMeter((chunk) => {
        sent += chunk.length;
        progress.update(sent);
      });
      const body = Readable.toWeb(createReadStream(file, { highWaterMark: 4 * 2 ** 20 }).pipe(meter)) as unknown as RequestInit['body'];
      await request(ctx, `/v1/blobs/sha256/${sha256}`, { method: 'PUT', body, headers: { 'content-type': 'application/octet-stream' } });
      progress.stop();
    }
    manifest.push({ path: name, sha256, size });
  }
  return request<{ id: string; memory_bytes: number }>(ctx, `/v1/models/${ref}/versions`, {
    method: 'POST',
    json: {
      files: manifest,
      ...(opts.settings ? { settings: opts.settings } : {}),
      ...(opts.retry ? { retry: opts.retry } : {}),
      ...(opts.loraFor ? { lora_for: opts.loraFor } : {}),
    },
  });
}
