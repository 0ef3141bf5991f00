/**
 * The context's sequences, made once at load and lent out to generations. A sequence keeps the
 * tokens it evaluated when it comes back: node-llama-cpp's LlamaChat and LlamaCompletion keep the
 * part of a sequence's state that matches their prompt and erase the rest, so lending the idle
 * sequence whose tokens share the longest prefix with a request's prompt reuses that prefix's
 * evaluation (a long system prompt, a chat's history) instead of computing it again.
 *
 * Ties go to the lowest id: llama.cpp decodes a run of consecutive sequence ids as one
 * micro-batch, so streams packed at the low ids batch together (node-llama-cpp's own
 * getSequence() reuses freed ids first in, first out, and scatters them).
 *
 * Reuse stays within an account: a sequence another account used last is cleared before it is
 * lent, so neither its tokens nor `cached_tokens` can tell one tenant what another one's prompts
 * began with.
 *
 * A session (x-session-affinity) keeps the sequence it last used while that sequence is idle,
 * so its next turn finds its history there; other requests take a session's sequence only when
 * no free one is idle, the least recently used session's first (bounded: one session per sequence).
 */
import type { LlamaContext, LlamaContextSequence, Token } from 'node-llama-cpp';

interface PooledSequence {
  id: number;
  sequence: LlamaContextSequence;
  /** The session that keeps this sequence's state, if any. */
  session?: string;
  /** Whose tokens it holds (an account): only its owner's requests reuse them. */
  owner?: string;
  /** When it was last given back: the least recently used session's sequence goes first. */
  releasedAt: number;
}

/**
 * A shared prefix shorter than this counts as none: a beginning token or a chat template's header
 * saves nothing worth giving up the lowest id (and another sequence's kept state) for.
 */
export const MIN_REUSED_TOKENS = 16;

/** How many leading tokens two token lists share. */
export function sharedPrefix(a: readonly Token[], b: readonly Token[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/**
 * Which idle sequence a request gets: the session's own one when it is idle; else, among those no
 * session keeps (or, when none is free, all of them), the longest shared prefix, the lowest id on a
 * tie, and among sessions' sequences the least recently used first.
 */
export function choose<T extends { id: number; session?: string; releasedAt: number }>(
  idle: readonly T[],
  prefixOf: (s: T) => number,
  session?: string,
): T | undefined {
  if (session !== undefined) {
    const own = idle.find((s) => s.session === session);
    if (own) return own;
  }
  const free = idle.filter((s) => s.session === undefined);
  const pool = free.length > 0 ? free : idle;
  let best: { s: T; prefix: number } | undefined;
  for (const s of pool) {
    const shared = prefixOf(s);
    const prefix = shared >= MIN_REUSED_TOKENS ? shared : 0;
    if (
      !best ||
      prefix > best.prefix ||
      (prefix === best.prefix &&
        (free.length > 0 ? s.id < best.s.id : s.releasedAt < best.s.releasedAt || (s.releasedAt === best.s.releasedAt && s.id < best.s.id)))
    ) {
      best = { s, prefix };
    }
  }
  return best?.s;
}

export interface LentSequence {
  id: number;
  sequence: LlamaContextSequence;
  /** The tokens the sequence held when lent: what the generation may reuse. */
  heldTokens: Token[];
}

export class SequencePool {
  private idle: PooledSequence[];
  private ids = new Map<LlamaContextSequence, number>();
  private waiters: Array<() => void> = [];
  private out = 0;
  private lent = new Map<number, { session?: string; owner?: string }>();

  /** `sequenceOptions`: what each sequence is made with (a draft model's token predictor, for speculative decoding). */
  constructor(context: LlamaContext, size: number, sequenceOptions?: () => Parameters<LlamaContext['getSequence']>[0]) {
    // A fresh context hands out ids 0, 1, 2, … in order.
    this.idle = Array.from({ length: size }, (_, id) => ({ id, sequence: context.getSequence(sequenceOptions?.()), releasedAt: 0 }));
    for (const { id, sequence } of this.idle) this.ids.set(sequence, id);
  }

  /**
   * The idle sequence that best fits `prompt` (the tokens the generation will evaluate, as near as
   * the caller can tell: the choice only steers reuse, the generation itself keeps what matches).
   */
  async acquire(
    signal?: AbortSignal,
    prompt: readonly Token[] = [],
    { session, owner }: { session?: string; owner?: string } = {},
  ): Promise<LentSequence> {
    while (this.idle.length === 0) {
      signal?.throwIfAborted();
      // A cancel while waiting ends the wait at once, and takes this waiter out of the line.
      await new Promise<void>((resolve) => {
        const wake = () => {
          signal?.removeEventListener('abort', abort);
          resolve();
        };
        const abort = () => {
          this.waiters = this.waiters.filter((w) => w !== wake);
          resolve();
        };
        this.waiters.push(wake);
        signal?.addEventListener('abort', abort, { once: true });
      });
    }
    // Session ids are the clients' own: one account's never finds another's sequence.
    const key = session === undefined ? undefined : JSON.stringify([owner ?? null, session]);
    const held = new Map(this.idle.map((s) => [s, s.owner === owner ? s.sequence.contextTokens : []]));
    const picked = choose(this.idle, (s) => sharedPrefix(held.get(s)!, prompt), key)!;
    this.idle = this.idle.filter((s) => s !== picked);
    this.out += 1;
    // Whatever session kept it lets go: its state is about to be overwritten (or is the session's own).
    if (key !== undefined) for (const s of this.idle) if (s.session === key) s.session = undefined;
    this.lent.set(picked.id, { session: key, owner });
    try {
      // Another account's tokens go first (under the context's lock, after the batch that runs now).
      if (picked.owner !== owner && picked.sequence.nextTokenIndex > 0) await picked.sequence.clearHistory();
    } catch (err) {
      this.release(picked.sequence);
      throw err;
    }
    return { id: picked.id, sequence: picked.sequence, heldTokens: held.get(picked)! };
  }

  /** The sequences lent out now (generating, or prefilling). */
  lentSequences(): LlamaContextSequence[] {
    return [...this.ids].filter(([, id]) => this.lent.has(id)).map(([sequence]) => sequence);
  }

  release(sequence: LlamaContextSequence): void {
    const id = this.ids.get(sequence)!;
    this.out -= 1;
    const { session, owner } = this.lent.get(id) ?? {};
    this.lent.delete(id);
    const at = this.idle.findIndex((s) => s.id > id);
    this.idle.splice(at < 0 ? this.idle.length : at, 0, { id, sequence, session, owner, releasedAt: performance.now() });
    this.waiters.shift()?.();
  }

  get busy(): boolean {
    return this.out > 0;
  }
}
