/** The scalar metadata of a GGUF file on disk, read from a prefix that grows until the header fits. */
import { open } from 'node:fs/promises';
import { type GgufScalar, parseGgufMetadata } from './gguf-metadata';
import { KilnError } from './kiln-error';

export class GgufFileError extends KilnError {}

/** The first read; vocabularies of 100k+ entries push a header past it, so reads grow up to the cap. */
const FIRST_READ = 2 ** 20;
const MAX_HEADER_BYTES = 64 * 2 ** 20;

export async function ggufFileMetadata(file: string): Promise<Map<string, GgufScalar>> {
  const handle = await open(file, 'r');
  try {
    const { size } = await handle.stat();
    for (let bytes = Math.min(FIRST_READ, size); ; bytes = Math.min(bytes * 8, MAX_HEADER_BYTES, size)) {
      const buf = Buffer.alloc(bytes);
      const { bytesRead } = await handle.read(buf, 0, bytes, 0);
      const parsed = parseGgufMetadata(buf.subarray(0, bytesRead));
      if (parsed.kind === 'metadata') return parsed.metadata;
      if (parsed.kind === 'invalid') throw new GgufFileError(`${file} is not a readable GGUF file: ${parsed.reason}`);
      if (bytes >= size) throw new GgufFileError(`${file} is not a readable GGUF file: it ends inside its header`);
      if (bytes >= MAX_HEADER_BYTES) throw new GgufFileError(`${file}: the GGUF header is over ${MAX_HEADER_BYTES} bytes`);
    }
  } finally {
    await handle.close();
  }
}
