import { nextSlotAt, PacedSlots } from '../../workers/paced-slots';

const abort = () => new AbortController();

describe('paced model slots', () => {
  it('spaces hand-outs by 0.9 slot interval only while tasks wait for slots', () => {
    const at = { busy: 4, slots: 8, lastIssuedAt: 1000, serviceMs: 800 };
    expect(nextSlotAt({ ...at, backlog: true })).toBe(1090);
    expect(nextSlotAt({ ...at, backlog: false })).toBe(0);
    expect(nextSlotAt({ ...at, busy: 0, backlog: true })).toBe(0);
  });

  it('hands out every slot at once with no backlog, and never more than the slots', async () => {
    const slots = new PacedSlots(4);
    const signal = abort().signal;
    const permits = await Promise.all([0, 1, 2, 3].map(() => slots.reserveSlot({}, signal)));
    permits.forEach((permit) => slots.markSlotUsed({ permit }));
    expect(slots.tryReserveSlot()).toBeNull();
    const fifth = slots.reserveSlot({}, signal);
    slots.releaseSlot({ permit: permits[0] });
    await expect(fifth).resolves.toBeDefined();
  });

  it('holds the next slot back under a backlog, and gives a held reservation up on abort', async () => {
    const slots = new PacedSlots(2);
    const ctl = abort();
    const first = await slots.reserveSlot({}, ctl.signal);
    slots.markSlotUsed({ permit: first });
    const busySince = Date.now();
    // A busy time long enough for the spacing (0.9 × busy ÷ slots) to be measured.
    while (Date.now() - busySince < 200) await new Promise((r) => setImmediate(r));
    slots.releaseSlot({ permit: first });
    // A task that arrives as soon as its slot is handed out: a backlog.
    const a = await slots.reserveSlot({}, ctl.signal);
    slots.markSlotUsed({ permit: a });
    const t0 = Date.now();
    await slots.reserveSlot({}, ctl.signal);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(80);

    const waiting = slots.reserveSlot({}, ctl.signal);
    ctl.abort();
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' });
  });
});
