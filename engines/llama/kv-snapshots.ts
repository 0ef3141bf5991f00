/**
 * KV snapshots on local disk: a sequence's evaluated tokens and their KV state, saved with
 * llama.cpp's own sequence state file after a long prompt was evaluated, and restored into a
 * sequence when a later prompt starts with the same tokens and no live sequence holds them. They
 * outlive the engine process and the model's unloading (scale to zero), so a long system prompt,
 * a document or a conversation's earlier turns are evaluated once per node, not once per process.
 *
 * A snapshot is content-addressed: its name is the sha256 of (version, owner, tokens), and its
 * sidecar records the tokens and the state file's checksum (./state-checksum.ts). Owners never
 * share snapshots (as they never share live sequences: reuse would tell one account what another
 * sent). A file whose size or checksum does not match its sidecar is discarded and the prompt
 * evaluated afresh, never loaded:
 * llama.cpp trusts a state file completely. The store keeps to a byte budget, least recently used
 * first out. Behind the disk, an object-storage tier (./kv-object-tier.ts) is shared by every
 * node: a snapshot saved here is uploaded after the result returned, and a prompt that no local
 * snapshot serves is looked up there and downloaded instead of evaluated. `bench/kv-snapshot.ts`
 * measures what a save and a restore cost, from disk and from object storage.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { LlamaContextSequence, Token } from 'node-llama-cpp';
import type { KvObjectTier, KvSnapshotEntry } from './kv-object-tier';
import { sharedPrefix } from './sequence-pool';
import { checksumOfStateFile, stateFileMatches } from './state-checksum';
import { stateFileSignature } from './state-file-signature';

export interface KvSnapshotOptions {
  dir: string;
  /** Bytes of snapshot files kept on disk at most. */
  budgetBytes: number;
  /** Prompts shorter than this are not worth a file: a prefill of them costs little. */
  minTokens: number;
  /** The tier behind the disk, shared by all nodes (absent: disk only). */
  objects?: KvObjectTier;
  /** Told the disk tier's bytes whenever they change. */
  onBytes?: (bytes: number) => void;
}

interface Snapshot extends KvSnapshotEntry {
  usedAt: number;
}

/** Where a restored prefix came from. */
export type KvSnapshotTier = 'disk' | 'object';

/** What a restore gave: the tokens now held, from which snapshot and tier, its bytes, and how long it took. */
export interface KvRestore {
  name: string;
  tokens: number;
  seconds: number;
  tier: KvSnapshotTier;
  bytes: number;
}

const OWNERLESS = '';

export class KvSnapshotStore {
  /** Snapshots written by this process (some may have been evicted since). */
  written = 0;
  /** Uploads to the object tier under way, checkpoints being recorded and downloads being recorded: they run after the result returned. */
  private uploading = new Set<Promise<void>>();
  private snapshots = new Map<string, Snapshot>();
  /**
   * The stat signature (./state-file-signature.ts) each state file had when this process last
   * hashed it (written, downloaded or checked): a file whose signature is unchanged is not read
   * and hashed again before a load. On a GPU host that check was most of a restore from disk (a
   * 47 MiB state: ~11 ms of llama.cpp's load beside ~30 ms of reading and hashing). A process
   * that starts knows none, so a file changed while no engine ran is always checked.
   */
  private checked = new Map<string, string>();
  private opened?: Promise<void>;

  constructor(private readonly opts: KvSnapshotOptions) {}

  /**
   * Reads the sidecars left by earlier processes, all at once (one by one, 625 of them take
   * 0.2–0.3 s); a snapshot without a readable one is removed.
   */
  open(): Promise<void> {
    this.opened ??= (async () => {
      await mkdir(this.opts.dir, { recursive: true });
      const sidecars = (await readdir(this.opts.dir)).filter((entry) => entry.endsWith('.json'));
      await Promise.all(
        sidecars.map(async (entry) => {
          try {
            const snapshot = JSON.parse(await readFile(path.join(this.opts.dir, entry), 'utf8')) as Snapshot;
            this.snapshots.set(snapshot.name, snapshot);
          } catch {
            await this.remove(entry.slice(0, -'.json'.length));
          }
        }),
      );
    })();
    return this.opened;
  }

  get bytes(): number {
    return [...this.snapshots.values()].reduce((sum, s) => sum + s.bytes, 0);
  }

  /** The snapshot sharing the longest prefix with `prompt`, when it beats `held` (what a live sequence already has) by enough to be worth a load. */
  private best(versionId: string, owner: string, prompt: readonly Token[], held: number): Snapshot | undefined {
    let best: { snapshot: Snapshot; shared: number } | undefined;
    for (const snapshot of this.snapshots.values()) {
      if (snapshot.versionId !== versionId || snapshot.owner !== owner) continue;
      const shared = sharedPrefix(snapshot.tokens, prompt);
      if (shared > (best?.shared ?? 0)) best = { snapshot, shared };
    }
    return best && best.shared >= this.opts.minTokens && best.shared > held + this.opts.minTokens / 2 ? best.snapshot : undefined;
  }

  /**
   * Loads into `sequence` the snapshot that holds the most of `prompt`, where one beats what the
   * sequence holds already. The generation then keeps the shared prefix and evaluates the rest.
   */
  async restore(
    versionId: string,
    owner: string | undefined,
    prompt: readonly Token[],
    sequence: LlamaContextSequence,
  ): Promise<KvRestore | undefined> {
    await this.open();
    const held = sharedPrefix(sequence.contextTokens, prompt);
    const started = performance.now();
    const local = this.best(versionId, owner ?? OWNERLESS, prompt, held);
    const found =
      local && (await this.intact(local))
        ? { snapshot: local, tier: 'disk' as const }
        : await this.fromObjects(versionId, owner, prompt, held);
    if (!found) return undefined;
    await sequence.loadStateFromFile(this.stateFile(found.snapshot.name), { acceptRisk: true });
    found.snapshot.usedAt = Date.now();
    if (found.tier === 'object') this.keepAfterLoad(found.snapshot);
    return {
      name: found.snapshot.name,
      tokens: sharedPrefix(sequence.contextTokens, prompt),
      seconds: (performance.now() - started) / 1000,
      tier: found.tier,
      bytes: found.snapshot.bytes,
    };
  }

  /**
   * Loads into `sequence` the latest checkpoint of generation `generation` (./exact-decoding.ts)
   * that holds at most `atMost` tokens (the prompt, the generated tokens evaluated and the one
   * pending), from disk or else object storage. Undefined where none is usable.
   */
  async restoreCheckpoint(
    versionId: string,
    owner: string | undefined,
    generation: string,
    atMost: number,
    sequence: LlamaContextSequence,
  ): Promise<(KvRestore & { held: Token[]; pending: Token[] }) | undefined> {
    await this.open();
    const key = owner ?? OWNERLESS;
    const started = performance.now();
    const length = (s: KvSnapshotEntry) => s.tokens.length + (s.checkpoint?.pending.length ?? 0);
    const local = [...this.snapshots.values()]
      .filter((s) => s.versionId === versionId && s.owner === key && s.checkpoint?.generation === generation && length(s) <= atMost)
      .sort((a, b) => length(b) - length(a))[0];
    let found: { snapshot: Snapshot; tier: KvSnapshotTier } | undefined =
      local && (await this.intact(local)) ? { snapshot: local, tier: 'disk' } : undefined;
    const remote = this.opts.objects && (await this.opts.objects.findCheckpoint(versionId, key, generation, atMost).catch(() => undefined));
    if (remote && (!found || length(remote) > length(found.snapshot))) {
      if (await this.downloaded(remote)) {
        const snapshot: Snapshot = { ...remote, usedAt: Date.now() };
        this.snapshots.set(snapshot.name, snapshot);
        found = { snapshot, tier: 'object' };
      }
    }
    if (!found?.snapshot.checkpoint) return undefined;
    await sequence.loadStateFromFile(this.stateFile(found.snapshot.name), { acceptRisk: true });
    found.snapshot.usedAt = Date.now();
    if (found.tier === 'object') this.keepAfterLoad(found.snapshot);
    return {
      name: found.snapshot.name,
      tokens: found.snapshot.tokens.length,
      seconds: (performance.now() - started) / 1000,
      tier: found.tier,
      bytes: found.snapshot.bytes,
      held: found.snapshot.tokens,
      pending: found.snapshot.checkpoint.pending,
    };
  }

  /** Whether a snapshot's file is whole (hashed, unless unchanged since this process last did); one that is not is removed. */
  private async intact(snapshot: Snapshot): Promise<boolean> {
    const file = this.stateFile(snapshot.name);
    const before = await stateFileSignature(file);
    const intact =
      before !== undefined &&
      before.bytes === snapshot.bytes &&
      (before.signature === this.checked.get(snapshot.name) || (await stateFileMatches(file, snapshot)));
    if (!intact) await this.remove(snapshot.name);
    else this.checked.set(snapshot.name, before.signature);
    return intact;
  }

  /**
   * Downloads `entry`'s state from the object tier into this disk tier (checked as it is written),
   * and notes the file as this process hashed it. False where there is none to use.
   */
  private async downloaded(entry: KvSnapshotEntry): Promise<boolean> {
    const file = this.stateFile(entry.name);
    if (!this.opts.objects || !(await this.opts.objects.download(entry, file))) return false;
    const now = await stateFileSignature(file);
    if (now) this.checked.set(entry.name, now.signature);
    return true;
  }

  /** A snapshot of the object tier that beats what the sequence holds, downloaded (and checked) into this disk tier. */
  private async fromObjects(
    versionId: string,
    owner: string | undefined,
    prompt: readonly Token[],
    held: number,
  ): Promise<{ snapshot: Snapshot; tier: 'object' } | undefined> {
    const objects = this.opts.objects;
    if (!objects) return undefined;
    const found = await objects.find(versionId, owner ?? OWNERLESS, prompt).catch(() => undefined);
    if (!found || found.shared <= held + this.opts.minTokens / 2) return undefined;
    if (!(await this.downloaded(found.entry))) return undefined;
    const snapshot: Snapshot = { ...found.entry, usedAt: Date.now() };
    // Known at once, so that no other restore downloads it again; its sidecar is written after the load.
    this.snapshots.set(snapshot.name, snapshot);
    return { snapshot, tier: 'object' };
  }

  /**
   * keep() for a snapshot just downloaded and loaded, and its use marked in the object tier: the
   * sidecars' writes and the disk tier's eviction pass (a few milliseconds) run after the load,
   * off the path to the first token.
   */
  private keepAfterLoad(snapshot: Snapshot): void {
    const { usedAt: _usedAt, ...entry } = snapshot;
    const background: Promise<void> = Promise.all([this.keep(snapshot), this.opts.objects?.touch(entry).catch(() => undefined)])
      .then(() => undefined)
      .catch(() => undefined)
      .finally(() => this.uploading.delete(background));
    this.uploading.add(background);
  }

  /** Records a snapshot whose state file is in place, then keeps to the budget. */
  private async keep(snapshot: Snapshot): Promise<void> {
    await writeFile(path.join(this.opts.dir, `${snapshot.name}.json`), JSON.stringify(snapshot));
    this.snapshots.set(snapshot.name, snapshot);
    await this.evict();
  }

  /** Resolves once the uploads started so far have ended (tests, benchmarks, shutdown). */
  async settled(): Promise<void> {
    while (this.uploading.size > 0) await Promise.all(this.uploading);
  }

  /**
   * Saves what `sequence` holds (the prompt and what was generated after it: a conversation's next
   * turn starts with both), unless it is short or a snapshot already holds it. Snapshots it
   * extends are removed: it answers every prompt they would.
   */
  async save(versionId: string, owner: string | undefined, sequence: LlamaContextSequence): Promise<void> {
    await this.store(versionId, owner, sequence);
  }

  /**
   * save(), saveCheckpoint() and publish(): a checkpoint's returns once the state is copied, with
   * the rest under way. `upload: false` leaves the object tier to the caller.
   */
  private async store(
    versionId: string,
    owner: string | undefined,
    sequence: LlamaContextSequence,
    { checkpoint, upload = true }: { checkpoint?: KvSnapshotEntry['checkpoint']; upload?: boolean } = {},
  ): Promise<void | { recorded: Promise<void> }> {
    await this.open();
    const tokens = [...sequence.contextTokens];
    // A checkpoint saves a generation's redrawing, however short its prompt: its folder does not depend on minTokens.
    if (!checkpoint && tokens.length < this.opts.minTokens) return;
    const key = owner ?? OWNERLESS;
    const mine = [...this.snapshots.values()].filter((s) => s.versionId === versionId && s.owner === key);
    // A checkpoint is looked up by its generation: only one of the same generation makes it needless.
    const covering = checkpoint ? mine.filter((s) => s.checkpoint?.generation === checkpoint.generation) : mine;
    if (covering.some((s) => sharedPrefix(s.tokens, tokens) === tokens.length)) return;
    const name = createHash('sha256')
      .update(JSON.stringify(checkpoint ? [versionId, key, tokens, checkpoint.generation] : [versionId, key, tokens]))
      .digest('hex');
    const file = this.stateFile(name);
    // The folder may have gone since the store opened (an operator cleared it).
    await mkdir(this.opts.dir, { recursive: true });
    const { fileSize } = await sequence.saveStateToFile(`${file}.tmp`);
    // The sequence may go on from here: a checkpoint's generation waits for no more than the state's copy.
    const recording = this.record(file, { name, versionId, key, tokens, fileSize, checkpoint }, mine, upload);
    if (!checkpoint) return recording;
    const background: Promise<void> = recording.catch(() => undefined).finally(() => this.uploading.delete(background));
    this.uploading.add(background);
    return { recorded: background };
  }

  /**
   * A generation's checkpoint (./exact-decoding.ts): resolves once the sequence's state is copied,
   * so the generation goes on while the copy is hashed and recorded (`recorded`); its upload to
   * the object tier follows on its own.
   */
  async saveCheckpoint(
    versionId: string,
    owner: string | undefined,
    sequence: LlamaContextSequence,
    checkpoint: NonNullable<KvSnapshotEntry['checkpoint']>,
  ): Promise<{ recorded: Promise<void> }> {
    return (await this.store(versionId, owner, sequence, { checkpoint })) ?? { recorded: Promise.resolve() };
  }

  /** A state file just written: its hash and sidecar, the older snapshots it makes needless gone, then the upload (where `upload`). */
  private async record(
    file: string,
    s: { name: string; versionId: string; key: string; tokens: Token[]; fileSize: number; checkpoint?: KvSnapshotEntry['checkpoint'] },
    mine: Snapshot[],
    upload: boolean,
  ): Promise<void> {
    const { name, versionId, key, tokens, fileSize, checkpoint } = s;
    await rename(`${file}.tmp`, file);
    const signature = await stateFileSignature(file);
    const snapshot: Snapshot = {
      name,
      versionId,
      owner: key,
      tokens,
      bytes: fileSize,
      ...(await checksumOfStateFile(file)),
      usedAt: Date.now(),
      ...(checkpoint ? { checkpoint } : {}),
    };
    if (signature) this.checked.set(name, signature.signature);
    this.written += 1;
    for (const older of mine) if (sharedPrefix(older.tokens, tokens) === older.tokens.length) await this.remove(older.name);
    await this.keep(snapshot);
    if (upload) this.upload(snapshot);
  }

  /**
   * Saves what `sequence` holds (as save does) and has it in the object tier before it returns:
   * a prefill node hands its snapshot to the decode node this way. The snapshot that holds the
   * sequence's tokens (a longer one may already hold them), or undefined when they are too few
   * to keep or no object tier is configured. Put once, by this call; the tier's eviction (a
   * listing of all of it) follows after the return, off the prompt's time to first token.
   */
  async publish(versionId: string, owner: string | undefined, sequence: LlamaContextSequence): Promise<KvSnapshotEntry | undefined> {
    const objects = this.opts.objects;
    if (!objects) return undefined;
    await this.store(versionId, owner, sequence, { upload: false });
    const tokens = sequence.contextTokens;
    const key = owner ?? OWNERLESS;
    const holding = [...this.snapshots.values()]
      .filter((s) => s.versionId === versionId && s.owner === key && sharedPrefix(s.tokens, tokens) === tokens.length)
      .sort((a, b) => a.tokens.length - b.tokens.length)[0];
    if (!holding) return undefined;
    await this.settled();
    const { usedAt: _usedAt, ...entry } = holding;
    // Idempotent: where an earlier upload got it there, only its sidecar is put again.
    await objects.put(entry, this.stateFile(holding.name));
    const evicting: Promise<void> = objects
      .evict()
      .catch(() => undefined)
      .finally(() => this.uploading.delete(evicting));
    this.uploading.add(evicting);
    return entry;
  }

  /** Off the result's path: the upload reads the file, not the context, and a failed one costs only the tier's copy. */
  private upload(snapshot: Snapshot): void {
    const objects = this.opts.objects;
    if (!objects) return;
    const { usedAt: _usedAt, ...entry } = snapshot;
    const uploading: Promise<void> = objects
      .upload(entry, this.stateFile(snapshot.name))
      .catch(() => undefined)
      .finally(() => this.uploading.delete(uploading));
    this.uploading.add(uploading);
  }

  /** Least recently used first, until the files fit the budget. */
  private async evict(): Promise<void> {
    const byAge = [...this.snapshots.values()].sort((a, b) => a.usedAt - b.usedAt);
    let total = this.bytes;
    for (const snapshot of byAge) {
      if (total <= this.opts.budgetBytes) break;
      total -= snapshot.bytes;
      await this.remove(snapshot.name);
    }
    this.opts.onBytes?.(total);
  }

  private stateFile(name: string): string {
    return path.join(this.opts.dir, `${name}.kvstate`);
  }

  private async remove(name: string): Promise<void> {
    this.snapshots.delete(name);
    this.checked.delete(name);
    await rm(this.stateFile(name), { force: true });
    await rm(path.join(this.opts.dir, `${name}.json`), { force: true });
  }
}
