/**
 * The model worker's slots, handed out so that busy slots come free one at a time rather than in
 * waves. A flood that fills every slot at once with work of the same length frees them all at
 * once, one service time later, and again after that: a prediction of another account that
 * arrives just after a wave waits for the next one, a whole service time, however fair the queue
 * is (the fair queue can only give it the next free slot). Here, once half the slots are busy,
 * the next slot is handed out no sooner than half a slot interval (service time ÷ slots, from the
 * slots' own measured busy times) after the previous one. A burst then fills the second half over
 * half a service time, and the frees that follow are spread out, so the next free slot is about
 * one slot interval away whenever something waits. Below half the slots nothing is delayed; at a
 * steady full load starts are a slot interval apart on average, so the spacing rarely binds and
 * the flood still gets every slot nobody else wants.
 */
import type { ActivitySlotInfo, CustomSlotSupplier, SlotPermit } from '@temporalio/worker';

/** When the next slot may be handed out (epoch ms), given the slots in use and the last hand-out. */
export function nextSlotAt(s: { busy: number; slots: number; lastIssuedAt: number; serviceMs: number }): number {
  if (s.busy < s.slots / 2) return 0;
  return s.lastIssuedAt + s.serviceMs / s.slots / 2;
}

/** Busy times older than this many tasks weigh ~1/e in the estimate. */
const SERVICE_TIME_MEMORY = 16;

interface PacedPermit extends SlotPermit {
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
  private lastIssuedAt = 0;
  /** Mean busy time of a slot; 0 until a task has finished, so nothing is delayed before then. */
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
    (ctx.permit as PacedPermit).usedAt = Date.now();
    this.busy++;
  }

  releaseSlot(ctx: { permit: SlotPermit; slotInfo?: ActivitySlotInfo }): void {
    const usedAt = (ctx.permit as PacedPermit).usedAt;
    if (usedAt !== undefined) {
      this.busy--;
      const ms = Date.now() - usedAt;
      // The mean of the first few, then a moving average that follows a change of model or load.
      this.finished++;
      this.serviceMs += (ms - this.serviceMs) / Math.min(this.finished, SERVICE_TIME_MEMORY);
    }
    this.issued--;
    this.wakeOne();
  }

  private tryIssue(now: number): SlotPermit | undefined {
    if (this.issued >= this.slots) return undefined;
    if (now < nextSlotAt({ busy: this.busy, slots: this.slots, lastIssuedAt: this.lastIssuedAt, serviceMs: this.serviceMs }))
      return undefined;
    return this.issue(now);
  }

  private issue(now: number): PacedPermit {
    this.issued++;
    this.lastIssuedAt = now;
    return {};
  }

  private wakeOne(): void {
    this.waiters.shift()?.wake();
  }

  /** A waiter held back by the spacing (not by a full house) is woken when the spacing has passed. */
  private schedule(): void {
    if (this.timer || this.issued >= this.slots) return;
    const at = nextSlotAt({ busy: this.busy, slots: this.slots, lastIssuedAt: this.lastIssuedAt, serviceMs: this.serviceMs });
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.wakeOne();
      },
      Math.max(0, at - Date.now()),
    );
    this.timer.unref();
  }
}

function abortError(): Error {
  const err = new Error('slot reservation aborted');
  err.name = 'AbortError';
  return err;
}
