/**
 * A model worker's slots, filled one slot interval apart when a backlog meets a free engine.
 *
 * A flood that finds every slot free takes them all at once. With work of similar length they then
 * come free together, a service time later, and again after that for as long as the flood lasts:
 * another account's prediction that arrives just after such a wave waits a whole service time for
 * the next one, however fair the queue's order (a fair queue can only give it the next slot that
 * comes free). Filled one interval apart (service time ÷ slots), the slots come free one interval
 * apart too, and the next free slot is never much more than an interval away.
 *
 * So at most one slot is held by a poll waiting for a task: the worker takes a burst one task at a
 * time and can look at the version's backlog between two. While more predictions wait for the
 * version than there are free slots, and the engine has not been full within the last service time
 * (it is filling, not serving a steady backlog), each further slot is handed out one interval after
 * the last start. A burst that fits the free slots starts at once; only work that would wait anyway
 * is spread; and once the engine is full, every slot that comes free is handed out at once
 * (work-conserving).
 */
import type { ActivitySlotInfo, CustomSlotSupplier, SlotPermit } from '@temporalio/worker';

/** What the version's queue holds now, and its recent median service time (null before any success). */
export interface VersionBacklog {
  waiting: number;
  serviceMs: number | null;
}

/** Busy times older than this many tasks weigh ~1/e in the local estimate of the service time. */
const SERVICE_TIME_MEMORY = 16;

/**
 * Of a slot interval, the least time between two hand-outs once the engine has been full within
 * the last service time: under 1, so that a service time measured a little long, or uneven work,
 * costs no throughput, while slots that came free together are still spread apart.
 */
const STEADY_SPACING = 0.9;

/**
 * How long to hold the next slot back while more predictions wait than there are free slots: the
 * rest of a slot interval since the last hand-out while the engine fills, of 0.9 of one once it is
 * serving a steady backlog; otherwise 0.
 */
export function rampDelay(s: {
  now: number;
  slots: number;
  busy: number;
  waiting: number;
  serviceMs: number | null;
  lastIssuedAt: number;
  lastFullAt: number;
}): number {
  if (s.busy === 0 || s.serviceMs === null || s.serviceMs <= 0 || s.waiting <= s.slots - s.busy) return 0;
  const filling = s.now - s.lastFullAt > s.serviceMs;
  const spacing = (filling ? 1 : STEADY_SPACING) * (s.serviceMs / s.slots);
  return Math.max(0, s.lastIssuedAt + spacing - s.now);
}

interface RampedPermit extends SlotPermit {
  usedAt?: number;
}

export class RampedSlots implements CustomSlotSupplier<ActivitySlotInfo> {
  readonly type = 'custom' as const;
  /** Permits handed out and not released: polls waiting for a task, and tasks running. */
  private issued = 0;
  /** Permits whose task is running. */
  private busy = 0;
  /** A reservation is reading the backlog. */
  private reading = false;
  private lastIssuedAt = 0;
  private lastFullAt = 0;
  /** Mean busy time of a slot here; 0 until a task has finished (the version's recent median stands in). */
  private serviceMs = 0;
  private finished = 0;
  private readonly waiters = new Set<() => void>();

  constructor(
    private readonly slots: number,
    private readonly readBacklog: () => Promise<VersionBacklog>,
  ) {}

  async reserveSlot(_ctx: unknown, abortSignal: AbortSignal): Promise<SlotPermit> {
    for (;;) {
      if (abortSignal.aborted) throw abortError();
      if (this.issued >= this.slots || this.reading || this.issued > this.busy) {
        await this.change(abortSignal);
        continue;
      }
      // One reservation at a time reads the backlog; the others wait for its outcome.
      this.reading = true;
      const delay = await this.holdBack().finally(() => {
        this.reading = false;
      });
      if (delay === 0 && this.issued < this.slots) {
        this.wakeAll();
        return this.issue();
      }
      await this.change(abortSignal, delay > 0 ? delay : undefined);
    }
  }

  tryReserveSlot(): SlotPermit | null {
    return this.issued < this.slots && this.issued === this.busy ? this.issue() : null;
  }

  markSlotUsed(ctx: { permit: SlotPermit }): void {
    const now = Date.now();
    (ctx.permit as RampedPermit).usedAt = now;
    this.busy++;
    if (this.busy >= this.slots) this.lastFullAt = now;
    this.wakeAll();
  }

  releaseSlot(ctx: { permit: SlotPermit }): void {
    const usedAt = (ctx.permit as RampedPermit).usedAt;
    if (usedAt !== undefined) {
      this.busy--;
      // The mean of the first few, then a moving average that follows a change of work or load.
      this.finished++;
      this.serviceMs += (Date.now() - usedAt - this.serviceMs) / Math.min(this.finished, SERVICE_TIME_MEMORY);
    }
    this.issued--;
    this.wakeAll();
  }

  /** The delay before the next hand-out; reads the backlog only while some slot is busy. */
  private async holdBack(): Promise<number> {
    // An idle engine keeps one poll waiting.
    if (this.busy === 0) return 0;
    const backlog = await this.readBacklog().catch(() => ({ waiting: 0, serviceMs: null }));
    const delay = rampDelay({
      now: Date.now(),
      slots: this.slots,
      busy: this.busy,
      waiting: backlog.waiting,
      serviceMs: this.finished > 0 ? this.serviceMs : backlog.serviceMs,
      lastIssuedAt: this.lastIssuedAt,
      lastFullAt: this.lastFullAt,
    });
    return delay;
  }

  private issue(): SlotPermit {
    this.issued++;
    this.lastIssuedAt = Date.now();
    return {} satisfies RampedPermit;
  }

  /** Resolves at the next start or release, after `timeoutMs` if given, or rejects on abort. */
  private change(abortSignal: AbortSignal, timeoutMs?: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const settle = (err?: Error) => {
        this.waiters.delete(done);
        abortSignal.removeEventListener('abort', onAbort);
        if (timer) clearTimeout(timer);
        if (err) reject(err);
        else resolve();
      };
      const done = () => settle();
      const onAbort = () => settle(abortError());
      const timer = timeoutMs === undefined ? undefined : setTimeout(done, timeoutMs);
      timer?.unref();
      abortSignal.addEventListener('abort', onAbort, { once: true });
      this.waiters.add(done);
    });
  }

  private wakeAll(): void {
    for (const wake of [...this.waiters]) wake();
  }
}

function abortError(): Error {
  const err = new Error('slot reservation aborted');
  err.name = 'AbortError';
  return err;
}
