import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';

/** A file's sha256 (hex), read in 4 MiB pieces; `onBytes` hears how much has been read so far. */
export async function sha256OfFile(file: string, onBytes?: (done: number) => void): Promise<string> {
  const hash = createHash('sha256');
  let done = 0;
  for await (const chunk of createReadStream(file, { highWaterMark: 4 * 2 ** 20 })) {
    hash.update(chunk as Buffer);
    done += (chunk as Buffer).length;
    onBytes?.(done);
  }
  return hash.digest('hex');
}
