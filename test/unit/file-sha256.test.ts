/** A file's sha256 read in pieces equals the hash of its bytes, with progress up to its size. */
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sha256OfFile } from '../../lib/file-sha256';

test('sha256 over several 4 MiB pieces, progress ending at the size', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-sha-'));
  try {
    const bytes = Buffer.alloc(9 * 2 ** 20 + 123, 7);
    bytes.write('kiln', 5_000_000);
    const file = path.join(dir, 'blob');
    await writeFile(file, bytes);
    const seen: number[] = [];
    expect(await sha256OfFile(file, (done) => seen.push(done))).toBe(createHash('sha256').update(bytes).digest('hex'));
    expect(seen.length).toBeGreaterThanOrEqual(3);
    expect(seen.at(-1)).toBe(bytes.length);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
