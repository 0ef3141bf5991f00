/**
 * What tells a KV state file unchanged since it was last hashed, without reading it: its device,
 * inode, size and change times. Any write through the file system moves its change time
 * (nanoseconds, `ctime` cannot be set from user space), and a file replaced by a rename has
 * another inode. Damage below the file system (a disk's bit rot) does not show: a process that
 * starts hashes each file once before its first load (./kv-snapshots.ts).
 */
import { stat } from 'node:fs/promises';

export interface StateFileSignature {
  signature: string;
  bytes: number;
}

/** The file's signature now; undefined when there is no such file. */
export async function stateFileSignature(file: string): Promise<StateFileSignature | undefined> {
  const s = await stat(file, { bigint: true }).catch(() => undefined);
  if (!s) return undefined;
  return { signature: `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`, bytes: Number(s.size) };
}
