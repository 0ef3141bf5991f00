/**
 * The object-storage tier of KV snapshots (MinIO or any S3): a node that never evaluated a prefix
 * restores it from here instead of evaluating it, after a restart on an empty disk, on another
 * node, or once its model version scaled to zero and warmed up elsewhere.
 *
 * Layout, one folder per model version (a LoRA adapter is a version of its own, so the adapter set
 * is part of it), owner (hashed: owners never share) and anchor, the hash of a prompt's first
 * `minTokens` tokens. A snapshot is useful only when it shares at least that many tokens with a
 * prompt, so a lookup lists one anchor's folder and reads only its sidecars:
 *   kv/<version>/<sha256(owner)>/<sha256(first minTokens tokens)>/<name>.json     tokens, bytes, checksum
 *   kv/<version>/<sha256(owner)>/<sha256(first minTokens tokens)>/<name>.kvstate  llama.cpp's state file
 * `name` is the sha256 of (version, owner, tokens): the same prefix gives the same key on every node.
 * The sidecar goes up after the state, so a sidecar names a whole state; a download is checked
 * against it (size and checksum, ./state-checksum.ts, hashed as it is written) and a mismatch
 * deletes both objects.
 * The tier keeps to a byte budget across all nodes: a sidecar is put again when it is used, and
 * eviction drops the snapshots whose sidecars are oldest.
 */
import { createHash } from 'node:crypto';
import { closeSync, mkdirSync, openSync, renameSync, writeSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import type { Token } from 'node-llama-cpp';
import type { Storage } from '../../lib/storage';
import { sharedPrefix } from './sequence-pool';
import { type StateChecksum, stateHasher } from './state-checksum';

/** A snapshot as its sidecar describes it: its state file's size and checksum among the rest. */
export interface KvSnapshotEntry extends StateChecksum {
  name: string;
  versionId: string;
  owner: string;
  tokens: Token[];
  bytes: number;
  /**
   * A generation's checkpoint (./exact-decoding.ts): the generation's key, under which a later
   * attempt looks it up, and the token it drew last, which the state does not hold yet.
   */
  checkpoint?: { generation: string; pending: Token[] };
}

export interface KvObjectTierOptions {
  /** Bytes of state objects the tier keeps at most, all nodes together. */
  budgetBytes: number;
  /** Must be the same on every node: it decides the anchor folder. */
  minTokens: number;
  /** Where in the bucket the tier lives. */
  prefix?: string;
  /** Told the tier's bytes each time eviction runs: as listed, or as last listed plus this node's puts since. */
  onBytes?: (bytes: number) => void;
}

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

/** How old the tier's last listing may be before eviction lists it again, whatever this node put since. */
const RELIST_MS = 30_000;

export class KvObjectTier {
  /** Sidecars read so far, by name: they never change (a snapshot's name is its content). */
  private sidecars = new Map<string, KvSnapshotEntry>();
  /**
   * The tier's bytes at its last listing plus the states this node put since, and when it was
   * listed: eviction lists the whole tier (every node's snapshots) only when that may pass the
   * budget, or the listing is older than RELIST_MS (other nodes' puts). A listing after every put
   * cost MinIO more CPU than the puts: with each greedy generation's checkpoint uploaded, MinIO took
   * 0.4–0.8 ms of CPU per generated token under 16 API streams, and 0.14–0.19 without the listings.
   */
  private known: { bytes: number; listedAt: number } | undefined;
  private readonly prefix: string;

  constructor(
    private readonly storage: Storage,
    private readonly opts: KvObjectTierOptions,
  ) {
    this.prefix = opts.prefix ?? 'kv/';
  }

  /** The folder of the snapshots that may share enough of `tokens`: undefined when there are too few tokens for any. */
  folder(versionId: string, owner: string, tokens: readonly Token[]): string | undefined {
    if (tokens.length < this.opts.minTokens) return undefined;
    const anchor = sha256(JSON.stringify(tokens.slice(0, this.opts.minTokens)));
    return `${this.prefix}${versionId}/${sha256(owner)}/${anchor}/`;
  }

  /** A generation's checkpoints: a folder of their own, found by the generation's key (its generated tokens are not known before). */
  checkpointFolder(versionId: string, owner: string, generation: string): string {
    return `${this.prefix}${versionId}/${sha256(owner)}/checkpoints/${generation}/`;
  }

  private keys(entry: KvSnapshotEntry) {
    const folder = entry.checkpoint
      ? this.checkpointFolder(entry.versionId, entry.owner, entry.checkpoint.generation)
      : this.folder(entry.versionId, entry.owner, entry.tokens)!;
    return { sidecar: `${folder}${entry.name}.json`, state: `${folder}${entry.name}.kvstate` };
  }

  /** The snapshot in the tier that shares the longest prefix with `prompt` (at least minTokens). */
  async find(versionId: string, owner: string, prompt: readonly Token[]): Promise<{ entry: KvSnapshotEntry; shared: number } | undefined> {
    const folder = this.folder(versionId, owner, prompt);
    if (!folder) return undefined;
    let best: { entry: KvSnapshotEntry; shared: number } | undefined;
    for await (const page of this.storage.list(folder)) {
      for (const entry of await this.sidecarsOf(page)) {
        if (entry.versionId !== versionId || entry.owner !== owner) continue;
        const shared = sharedPrefix(entry.tokens, prompt);
        if (shared > (best?.shared ?? 0)) best = { entry, shared };
      }
    }
    return best && best.shared >= this.opts.minTokens ? best : undefined;
  }

  /** The generation's checkpoint in the tier holding the most tokens, at most `atMost` (state and pending together). */
  async findCheckpoint(versionId: string, owner: string, generation: string, atMost: number): Promise<KvSnapshotEntry | undefined> {
    let best: KvSnapshotEntry | undefined;
    for await (const page of this.storage.list(this.checkpointFolder(versionId, owner, generation))) {
      for (const entry of await this.sidecarsOf(page)) {
        if (!entry.checkpoint || entry.checkpoint.generation !== generation || entry.versionId !== versionId || entry.owner !== owner)
          continue;
        const length = entry.tokens.length + entry.checkpoint.pending.length;
        if (length <= atMost && length > (best ? best.tokens.length + best.checkpoint!.pending.length : 0)) best = entry;
      }
    }
    return best;
  }

  /**
   * The sidecars among a listing's keys, read side by side: a generation's folder holds each
   * checkpoint it saved, and a process that restarted has read none of them yet.
   */
  private async sidecarsOf(keys: string[]): Promise<KvSnapshotEntry[]> {
    const entries = await Promise.all(keys.filter((key) => key.endsWith('.json')).map((key) => this.sidecar(key)));
    return entries.filter((entry): entry is KvSnapshotEntry => entry !== undefined);
  }

  private async sidecar(key: string): Promise<KvSnapshotEntry | undefined> {
    const name = key.slice(key.lastIndexOf('/') + 1, -'.json'.length);
    const known = this.sidecars.get(name);
    if (known) return known;
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of await this.storage.read(key)) chunks.push(chunk as Buffer);
      const entry = JSON.parse(Buffer.concat(chunks).toString('utf8')) as KvSnapshotEntry;
      if (entry.name !== name) return undefined;
      this.sidecars.set(name, entry);
      return entry;
    } catch {
      // Evicted since the listing, or unreadable: not a candidate.
      return undefined;
    }
  }

  /**
   * Downloads the snapshot's state to `file`, hashing it as it is written. A state whose size or
   * checksum is not its sidecar's is deleted from the tier and false returned: it is never loaded.
   */
  async download(entry: KvSnapshotEntry, file: string): Promise<boolean> {
    const { state } = this.keys(entry);
    const hash = await stateHasher(entry);
    let bytes = 0;
    const tmp = `${file}.${process.pid}.download`;
    try {
      // The disk tier's folder may have gone since the store opened (an operator cleared it).
      // Synchronous, as the writes and the rename below: each is a system call of microseconds,
      // where the thread pool's hop can wait behind llama.cpp's work queued there.
      mkdirSync(path.dirname(tmp), { recursive: true });
      const fd = openSync(tmp, 'w');
      try {
        // Each chunk is hashed and written before the next socket read reuses its buffer.
        await this.storage.readInto(state, (chunk) => {
          hash.update(chunk);
          bytes += chunk.length;
          writeAll(fd, chunk);
        });
      } finally {
        closeSync(fd);
      }
    } catch {
      await rm(tmp, { force: true });
      return false;
    }
    if (bytes !== entry.bytes || !hash.matches(entry)) {
      await rm(tmp, { force: true });
      await this.discard(entry);
      return false;
    }
    renameSync(tmp, file);
    return true;
  }

  /**
   * Marks a snapshot as used now: its sidecar is put again, which makes it the newest for
   * eviction. Called once the state is loaded: a put beside the load slowed it on 2 cores.
   */
  async touch(entry: KvSnapshotEntry): Promise<void> {
    await this.storage.putBytes(this.keys(entry).sidecar, JSON.stringify(entry));
  }

  /** Removes a snapshot from the tier (sidecar first: a state without one is never looked up). */
  async discard(entry: KvSnapshotEntry): Promise<void> {
    const { sidecar, state } = this.keys(entry);
    this.sidecars.delete(entry.name);
    await this.storage.delete(sidecar).catch(() => undefined);
    await this.storage.delete(state).catch(() => undefined);
  }

  /** Puts a snapshot saved on disk at `file` into the tier (put), then keeps to the budget. */
  async upload(entry: KvSnapshotEntry, file: string): Promise<void> {
    await this.put(entry, file);
    await this.evict();
  }

  /** Puts a snapshot saved on disk at `file` into the tier: its state (unless its sidecar is there already), then its sidecar. */
  async put(entry: KvSnapshotEntry, file: string): Promise<void> {
    const { sidecar, state } = this.keys(entry);
    if ((await this.storage.size(sidecar)) === undefined) {
      await this.storage.putFile(state, file);
      if (this.known) this.known.bytes += entry.bytes;
    }
    await this.storage.putBytes(sidecar, JSON.stringify(entry));
    this.sidecars.set(entry.name, entry);
  }

  /** Oldest sidecar first, until the state objects fit the budget (once a listing may find them past it). */
  async evict(): Promise<void> {
    const known = this.known;
    if (known && known.bytes <= this.opts.budgetBytes && performance.now() - known.listedAt < RELIST_MS) {
      this.opts.onBytes?.(known.bytes);
      return;
    }
    const listedAt = performance.now();
    const snapshots = new Map<string, { sidecar?: string; state?: string; bytes: number; usedAt: number }>();
    let token: string | undefined;
    do {
      const page = await this.storage.client.send(
        new ListObjectsV2Command({ Bucket: this.storage.bucket, Prefix: this.prefix, ContinuationToken: token }),
      );
      for (const object of page.Contents ?? []) {
        const key = object.Key ?? '';
        const stem = key.replace(/\.(json|kvstate)$/, '');
        const s = snapshots.get(stem) ?? { bytes: 0, usedAt: 0 };
        if (key.endsWith('.json')) Object.assign(s, { sidecar: key, usedAt: object.LastModified?.getTime() ?? 0 });
        else if (key.endsWith('.kvstate')) Object.assign(s, { state: key, bytes: object.Size ?? 0 });
        snapshots.set(stem, s);
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    let total = [...snapshots.values()].reduce((sum, s) => sum + s.bytes, 0);
    // A state without a sidecar is an upload under way (or one cut off): it counts, and goes last.
    const byAge = [...snapshots.values()].filter((s) => s.sidecar).sort((a, b) => a.usedAt - b.usedAt);
    for (const s of byAge) {
      if (total <= this.opts.budgetBytes) break;
      total -= s.bytes;
      this.sidecars.delete(s.sidecar!.slice(s.sidecar!.lastIndexOf('/') + 1, -'.json'.length));
      await this.storage.delete(s.sidecar!).catch(() => undefined);
      if (s.state) await this.storage.delete(s.state).catch(() => undefined);
    }
    this.known = { bytes: total, listedAt };
    this.opts.onBytes?.(total);
  }
}

/**
 * Writes a downloaded chunk into the page cache on the event loop, between two socket reads. A
 * write stream hands each chunk to the thread pool instead (and would have to copy it out of the
 * reused read buffer), and on 2 cores those hops beside the store's own sending cost more than
 * the writes: a 16.5 MiB state took ~74 ms through a stream and ~46 ms this way, each write of a
 * socket's chunk a few tens of microseconds.
 */
function writeAll(fd: number, chunk: Buffer): void {
  for (let at = 0; at < chunk.length; ) at += writeSync(fd, chunk, at);
}
