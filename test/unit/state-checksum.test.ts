/** A KV state file's checksum: XXH3-128 for new snapshots, SHA-256 still checked for sidecars that carry it, any changed byte caught. */
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { checksumOfStateFile, stateFileMatches, stateHasher } from '../../engines/llama/state-checksum';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-state-checksum-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

/** A file over several 4 MiB read pieces, and the same bytes with one of them changed. */
async function stateFiles() {
  const bytes = Buffer.alloc(9 * 2 ** 20 + 77, 3);
  bytes.write('kv state', 4_500_000);
  const changed = Buffer.from(bytes);
  changed[8 * 2 ** 20 + 5] ^= 1;
  const [whole, damaged] = [path.join(dir, 'whole.kvstate'), path.join(dir, 'damaged.kvstate')];
  await writeFile(whole, bytes);
  await writeFile(damaged, changed);
  return { bytes, whole, damaged };
}

test('a new snapshot gets an XXH3-128 that its file matches and a file with one bit changed does not', async () => {
  const { whole, damaged } = await stateFiles();
  const checksum = await checksumOfStateFile(whole);
  expect(checksum).toEqual({ xxh128: expect.stringMatching(/^[0-9a-f]{32}$/) });
  expect(await stateFileMatches(whole, checksum)).toBe(true);
  expect(await stateFileMatches(damaged, checksum)).toBe(false);
});

test('the checksum does not depend on how the bytes are cut into pieces', async () => {
  const { bytes, whole } = await stateFiles();
  const hasher = await stateHasher();
  for (let at = 0; at < bytes.length; at += 65_537) hasher.update(bytes.subarray(at, at + 65_537));
  expect(hasher.digest()).toEqual(await checksumOfStateFile(whole));
});

test('a sidecar written before XXH3 is checked against its SHA-256', async () => {
  const { bytes, whole, damaged } = await stateFiles();
  const legacy = { sha256: createHash('sha256').update(bytes).digest('hex') };
  expect(await stateFileMatches(whole, legacy)).toBe(true);
  expect(await stateFileMatches(damaged, legacy)).toBe(false);
});

test('a sidecar with no checksum matches nothing', async () => {
  const { whole } = await stateFiles();
  expect(await stateFileMatches(whole, {})).toBe(false);
});

test('a hasher kept for reuse starts afresh: interleaved and reused hashers each give their own bytes’ checksum', async () => {
  const { bytes, whole, damaged } = await stateFiles();
  const [expectedWhole, expectedDamaged] = [await checksumOfStateFile(whole), await checksumOfStateFile(damaged)];
  // Two at once, then done; the next two take the kept ones back, one of them fed a half only.
  const [a, b] = [await stateHasher(), await stateHasher()];
  a.update(bytes);
  expect(a.digest()).toEqual(expectedWhole);
  b.update(bytes.subarray(0, 1000));
  const [c, d] = [await stateHasher(), await stateHasher()];
  c.update(bytes);
  b.update(bytes.subarray(1000));
  expect(b.digest()).toEqual(expectedWhole);
  const changed = Buffer.from(bytes);
  changed[8 * 2 ** 20 + 5] ^= 1;
  d.update(changed);
  expect(d.digest()).toEqual(expectedDamaged);
  expect(c.digest()).toEqual(expectedWhole);
  // A digest asked for again is the same, even once its hasher serves another checksum.
  const e = await stateHasher();
  e.update(changed);
  expect(a.digest()).toEqual(expectedWhole);
  expect(e.digest()).toEqual(expectedDamaged);
});
