/** A file's sha256 read in pieces equals the hash of its bytes, with progress up to its size; on the hashing thread too. */
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sha256OfFile, sha256OfFileOffThread } from '../../lib/file-sha256';

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

test('the hashing thread answers each of several files at once with its own hash, and a missing file with an error', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-sha-'));
  try {
    const files = await Promise.all(
      [1, 2, 3].map(async (n) => {
        const bytes = Buffer.alloc(n * 2 ** 20 + n, n);
        const file = path.join(dir, `blob-${n}`);
        await writeFile(file, bytes);
        return { file, sha256: createHash('sha256').update(bytes).digest('hex') };
      }),
    );
    expect(await Promise.all(files.map((f) => sha256OfFileOffThread(f.file)))).toEqual(files.map((f) => f.sha256));
    await expect(sha256OfFileOffThread(path.join(dir, 'missing'))).rejects.toThrow(/hashing .*missing/);
    // The thread goes on serving after an error.
    expect(await sha256OfFileOffThread(files[0].file)).toBe(files[0].sha256);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
