import { RampedSlots, rampDelay, type VersionBacklog } from '../../workers/ramped-slots';

const at = { now: 10_000, slots: 8, busy: 3, waiting: 50, serviceMs: 800, lastIssuedAt: 9_950, lastFullAt: 0 };

describe('ramped model slots', () => {
  it('holds the next slot back one slot interval after the last hand-out while a backlog exceeds the free slots', () => {
    expect(rampDelay(at)).toBe(50); // 9,950 + 800 ÷ 8 − 10,000
    expect(rampDelay({ ...at, busy: 0 })).toBe(0); // an idle engine takes the next task at once
    expect(rampDelay({ ...at, waiting: 5 })).toBe(0); // the backlog fits the five free slots
    expect(rampDelay({ ...at, lastFullAt: 9_500 })).toBe(40); // full within a service time: 0.9 of an interval
    expect(rampDelay({ ...at, serviceMs: null })).toBe(0); // no service time known yet
    expect(rampDelay({ ...at, lastIssuedAt: 9_000 })).toBe(0); // an interval has passed already
  });

  it('keeps at most one poll waiting, and spaces starts while a backlog fills the engine', async () => {
    const backlog: VersionBacklog = { waiting: 100, serviceMs: 400 };
    const slots = new RampedSlots(4, async () => backlog);
    const signal = new AbortController().signal;
    const first = await slots.reserveSlot({}, signal);
    expect(slots.tryReserveSlot()).toBeNull(); // a poll already waits for a task
    slots.markSlotUsed({ permit: first });
    const t0 = Date.now();
    const second = await slots.reserveSlot({}, signal);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(90); // 400 ms ÷ 4 slots, less timer slack
    slots.markSlotUsed({ permit: second });

    // A backlog that fits the free slots starts at once.
    backlog.waiting = 1;
    const t1 = Date.now();
    const third = await slots.reserveSlot({}, signal);
    expect(Date.now() - t1).toBeLessThan(50);
    slots.markSlotUsed({ permit: third });
    slots.releaseSlot({ permit: first });
    slots.releaseSlot({ permit: second });
    slots.releaseSlot({ permit: third });
  });

  it('never hands out more than its slots, and gives a waiting reservation up on abort', async () => {
    const slots = new RampedSlots(1, async () => ({ waiting: 0, serviceMs: null }));
    const ctl = new AbortController();
    const only = await slots.reserveSlot({}, ctl.signal);
    slots.markSlotUsed({ permit: only });
    const waiting = slots.reserveSlot({}, ctl.signal);
    ctl.abort();
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' });
    const next = slots.reserveSlot({}, new AbortController().signal);
    slots.releaseSlot({ permit: only });
    await expect(next).resolves.toBeDefined();
  });
});
