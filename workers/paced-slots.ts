/**
 * The model worker's slots, handed out so that under a backlog busy slots come free one at a time
 * rather than in waves. A flood that fills every slot at once with work of the same length frees
 * them all at once, one service time later, and again after that: another account's prediction
 * that arrives just after a wave waits for the next one, a whole service time, however fair the
 * queue is (a fair queue can only give it the next slot that comes free). Here, while the queue
 * has a backlog (the last task came within a slot interval of its poll), a slot is handed out no
 * sooner than `SPACING` slot intervals (service time ÷ slots, from the slots' own measured busy
 * times) after the previous one. Starts then spread out over one service time, and so do the
 * frees that follow: the next free slot is about one slot interval away. With no backlog nothing
 * waits, so an idle engine still takes a burst at once; and the spacing is a little under the
 * rate the slots can sustain, so a backlog still gets every slot nobody else wants.
 */
import type { ActivitySlotInfo, CustomSlotSupplier, SlotPermit } from '@temporalio/worker';

/** Of a slot interval: below 1 so that an estimate a little long, or uneven work, costs no throughput. */
const SPACING = 0.9;

/** Busy times older than this many tasks weigh ~1/e in the estimate. */
const SERVICE_TIME_MEMORY = 16;

/** When the next slot may be handed out (epoch ms): at once unless tasks are waiting for slots. */
export function nextSlotAt(s: { busy: number; slots: number; backlog: boolean; lastIssuedAt: number; serviceMs: number }): number {
  if (s.busy === 0 || !s.backlog) return 0;
  return s.lastIssuedAt + (SPACING * s.serviceMs) / s.slots;
}

interface PacedPermit extends SlotPermit {
  issuedAt: number;
  usedAt?: number;
}

interface Waiter {
  wake: () => void;
}

export class PacedSlots implements CustomSlotSupplier<ActivitySlotInfo> {
  readonly type = 'custom' as const;
  /** Permits handed out and not released: pollers waiting for a task, and tasks running. */
  private issued = 0;
  /** Permits whose task is running. */
  private busy = 0;
  /** Whether the last task reached its poll within a slot interval: tasks are waiting for slots. */
  private backlog = false;
  private lastIssuedAt = 0;
  /** Mean busy time of a slot; 0 until a task has finished, so nothing waits before then. */
  private serviceMs = 0;
  private finished = 0;
  private readonly waiters: Waiter[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly slots: number) {}

  async reserveSlot(_ctx: unknown, abortSignal: AbortSignal): Promise<SlotPermit> {
    for (;;) {
      if (abortSignal.aborted) throw abortError();
      const permit = this.tryIssue(Date.now());
      if (permit) {
        if (this.waiters.length > 0) this.schedule();
        return permit;
      }
      await new Promise<void>((resolve, reject) => {
        const waiter: Waiter = {
          wake: () => {
            abortSignal.removeEventListener('abort', onAbort);
            resolve();
          },
        };
        const onAbort = () => {
          this.waiters.splice(this.waiters.indexOf(waiter), 1);
          reject(abortError());
        };
        abortSignal.addEventListener('abort', onAbort, { once: true });
        this.waiters.push(waiter);
        this.schedule();
      });
    }
  }

  tryReserveSlot(): SlotPermit | null {
    return this.issued < this.slots ? this.issue(Date.now()) : null;
  }

  markSlotUsed(ctx: { permit: SlotPermit }): void {
    const permit = ctx.permit as PacedPermit;
    permit.usedAt = Date.now();
    this.busy++;
    this.backlog = this.serviceMs > 0 && permit.usedAt - permit.issuedAt < this.serviceMs / this.slots;
  }

  releaseSlot(ctx: { permit: SlotPermit }): void {
    const usedAt = (ctx.permit as PacedPermit).usedAt;
    if (usedAt !== undefined) {
      this.busy--;
      // The mean of the first few, then a moving average that follows a change of work or load.
      this.finished++;
      this.serviceMs += (Date.now() - usedAt - this.serviceMs) / Math.min(this.finished, SERVICE_TIME_MEMORY);
    }
    this.issued--;
    this.waiters.shift()?.wake();
  }

  private nextAt(): number {
    return nextSlotAt({
      busy: this.busy,
      slots: this.slots,
      backlog: this.backlog,
      lastIssuedAt: this.lastIssuedAt,
      serviceMs: this.serviceMs,
    });
  }

  private tryIssue(now: number): SlotPermit | undefined {
    if (this.issued >= this.slots || now < this.nextAt()) return undefined;
    return this.issue(now);
  }

  private issue(now: number): PacedPermit {
    this.issued++;
    this.lastIssuedAt = now;
    return { issuedAt: now };
  }

  /** A waiter held back by the spacing (not by a full house) is woken when the spacing has passed. */
  private schedule(): void {
    if (this.timer || this.issued >= this.slots) return;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.waiters.shift()?.wake();
      },
      Math.max(0, this.nextAt() - Date.now()),
    );
    this.timer.unref();
  }
}

function abortError(): Error {
  const err = new Error('slot reservation aborted');
  err.name = 'AbortError';
  return err;
}
