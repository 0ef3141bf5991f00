/**
 * The checksum that tells a whole KV state file from a torn or damaged one before llama.cpp, which
 * trusts a state file completely, loads it (./kv-snapshots.ts, ./kv-object-tier.ts).
 *
 * XXH3-128, from hash-wasm (WebAssembly: no native build, and it bundles into the GPU check's
 * pack). A sidecar sits beside its state in the same tier, so a cryptographic hash would add no
 * protection against whoever can write there; it only costs more: on a 16 MiB state on the 2-core
 * box SHA-256 took 14–20 ms against 4–6 ms, a third of a restore from object storage. Sidecars
 * written before carry a SHA-256, which is still checked as such.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { createXXHash128 } from 'hash-wasm';

/** What a sidecar records of its state file's contents: one of the two. */
export interface StateChecksum {
  /** XXH3-128, hex: every snapshot written now. */
  xxh128?: string;
  /** SHA-256, hex: snapshots written before XXH3. */
  sha256?: string;
}

/** A checksum computed piece by piece, in the algorithm a sidecar asks for. */
export interface StateHasher {
  update(chunk: Uint8Array): void;
  /** Whether what was given matches `expected`. */
  matches(expected: StateChecksum): boolean;
}

/** A hasher for `expected`'s algorithm (XXH3-128 for a new snapshot, whose checksum is not known yet). */
export async function stateHasher(expected?: StateChecksum): Promise<StateHasher & { digest(): StateChecksum }> {
  const algorithm: keyof StateChecksum = expected?.xxh128 === undefined && expected?.sha256 !== undefined ? 'sha256' : 'xxh128';
  const xxh = algorithm === 'xxh128' ? await xxh128Hash() : undefined;
  const hash: { update(chunk: Uint8Array): unknown; digest(encoding: 'hex'): string } = xxh ?? createHash('sha256');
  let hex: string | undefined;
  const digest = () => {
    if (hex === undefined) {
      hex = hash.digest('hex');
      if (xxh && idleXxh128.length < IDLE_XXH128_KEPT) idleXxh128.push(xxh);
    }
    return { [algorithm]: hex };
  };
  return {
    update: (chunk) => void hash.update(chunk),
    digest,
    matches: (e) => e[algorithm] !== undefined && digest()[algorithm] === e[algorithm],
  };
}

type Xxh128 = Awaited<ReturnType<typeof createXXHash128>>;

/**
 * XXH3 hashers done with, kept for the next checksum: a new one instantiates its WebAssembly
 * module, 0.7–2 ms on the 2-core box, on the path of every restore from object storage.
 */
const idleXxh128: Xxh128[] = [];
const IDLE_XXH128_KEPT = 4;

async function xxh128Hash(): Promise<Xxh128> {
  const hash = idleXxh128.pop() ?? (await createXXHash128());
  hash.init();
  return hash;
}

/** Reads `file` in 4 MiB pieces into `hasher` (each piece hashes in about a millisecond on the event loop). */
async function hashFile(file: string, hasher: StateHasher): Promise<void> {
  for await (const chunk of createReadStream(file, { highWaterMark: 4 * 2 ** 20 })) hasher.update(chunk as Buffer);
}

/** The checksum of a state file just written. */
export async function checksumOfStateFile(file: string): Promise<StateChecksum> {
  const hasher = await stateHasher();
  await hashFile(file, hasher);
  return hasher.digest();
}

/** Whether `file`'s contents match the checksum its sidecar recorded. */
export async function stateFileMatches(file: string, expected: StateChecksum): Promise<boolean> {
  const hasher = await stateHasher(expected);
  await hashFile(file, hasher);
  return hasher.matches(expected);
}
