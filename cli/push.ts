/**
 * `kiln push owner/name file...`: hashes each file, uploads the blobs the server lacks (streamed,
 * with a progress bar), and creates a version. A GGUF file's memory need is estimated from its
 * metadata, so placement can pack nodes well.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { byteMeter } from '../lib/byte-meter';
import { estimateLlamaMemoryBytes } from '../workers/engines/llama-memory';
import { loadNodeLlamaCpp } from '../workers/engines/llama-engine';
import { request, type ApiContext } from './client';
import { byteBar as bar } from './progress-bar';

async function sha256Of(file: string, size: number, quiet: boolean): Promise<string> {
  const hash = createHash('sha256');
  const progress = bar('hashing', size, quiet);
  let done = 0;
  for await (const chunk of createReadStream(file, { highWaterMark: 4 * 2 ** 20 })) {
    hash.update(chunk as Buffer);
    done += (chunk as Buffer).length;
    progress.update(done);
  }
  progress.stop();
  return hash.digest('hex');
}

async function memoryEstimate(file: string, size: number): Promise<number | undefined> {
  if (!file.endsWith('.gguf')) return undefined;
  const { readGgufFileInfo } = await loadNodeLlamaCpp();
  const info = await readGgufFileInfo(file, { readTensorInfo: false, logWarnings: false });
  const arch = info.architectureMetadata as {
    block_count?: number;
    embedding_length?: number;
    attention?: { head_count?: number; head_count_kv?: number };
  };
  if (!arch?.block_count || !arch.embedding_length || !arch.attention?.head_count) return undefined;
  const shape = {
    layers: arch.block_count,
    embedding: arch.embedding_length,
    heads: arch.attention.head_count,
    kvHeads: arch.attention.head_count_kv,
  };
  return estimateLlamaMemoryBytes(size, shape, 4096, 4);
}

export async function push(
  ctx: ApiContext,
  ref: string,
  files: string[],
  opts: { quiet: boolean; settings?: { sequences?: number; idleTtlSeconds?: number }; retry?: { max_attempts: number; initial_interval_s?: number; backoff?: number } },
) {
  const manifest = [];
  let memory = 0;
  let estimated = true;
  for (const file of files) {
    const { size } = await stat(file);
    const sha256 = await sha256Of(file, size, opts.quiet);
    const exists = await fetch(`${ctx.url}/v1/blobs/sha256/${sha256}`, { method: 'HEAD', headers: { authorization: `Bearer ${ctx.token}` } });
    if (exists.status === 200) {
      if (!opts.quiet) console.log(`${path.basename(file)}: already stored (sha256 ${sha256.slice(0, 12)}…)`);
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
    manifest.push({ path: path.basename(file), sha256, size });
    const m = await memoryEstimate(file, size);
    if (m === undefined) estimated = false;
    memory += m ?? 0;
  }
  return request<{ id: string; memory_bytes: number }>(ctx, `/v1/models/${ref}/versions`, {
    method: 'POST',
    json: { files: manifest, ...(estimated ? { memory_bytes: memory } : {}), ...(opts.settings ? { settings: opts.settings } : {}), ...(opts.retry ? { retry: opts.retry } : {}) },
  });
}
