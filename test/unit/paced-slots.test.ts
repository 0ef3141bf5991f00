import { nextSlotAt, PacedSlots } from '../../workers/paced-slots';

const used = (slots: PacedSlots, permit: object) => slots.markSlotUsed({ permit });

describe('paced model slots', () => {
  it('spaces hand-outs by half a slot interval only once half the slots are busy', () => {
    expect(nextSlotAt({ busy: 3, slots: 8, lastIssuedAt: 1000, serviceMs: 800 })).toBe(0);
    expect(nextSlotAt({ busy: 4, slots: 8, lastIssuedAt: 1000, serviceMs: 800 })).toBe(1050);
  });

  it('hands out every slot at once until a busy time is known, and never more than the slots', async () => {
    const slots = new PacedSlots(4);
    const abort = new AbortController();
    const permits = await Promise.all([0, 1, 2, 3].map(() => slots.reserveSlot({}, abort.signal)));
    permits.forEach((p) => used(slots, p));
    expect(slots.tryReserveSlot()).toBeNull();
    const fifth = slots.reserveSlot({}, abort.signal);
    slots.releaseSlot({ permit: permits[0] });
    await expect(fifth).resolves.toBeDefined();
  });

  it('holds the next slot back after a measured busy time, and gives it up on abort', async () => {
    const slots = new PacedSlots(2);
    const abort = new AbortController();
    const first = await slots.reserveSlot({}, abort.signal);
    used(slots, first);
    const started = Date.now();
    // A busy time long enough that the spacing (busy ÷ slots ÷ 2) is measurable.
    while (Date.now() - started < 200) await new Promise((r) => setImmediate(r));
    slots.releaseSlot({ permit: first });
    const a = await slots.reserveSlot({}, abort.signal);
    used(slots, a);
    const t0 = Date.now();
    await slots.reserveSlot({}, abort.signal);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(40);

    const waiting = slots.reserveSlot({}, abort.signal);
    abort.abort();
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' });
  });
});
