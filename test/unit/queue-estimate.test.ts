/** Queue position and ETA in the fair queue's order (domain/queue-estimate.ts). */
import { estimateQueue, type QueueState } from '../../domain/queue-estimate';

const state = (over: Partial<QueueState>): QueueState => ({
  mine: { weight: 1, earlier: 0 },
  others: [],
  running: 0,
  slots: 4,
  serviceSeconds: 2,
  handoverSeconds: null,
  ...over,
});

test('alone with free slots: first in line, starts at once', () => {
  expect(estimateQueue(state({}))).toEqual({ position: 1, aheadAll: 0, etaSeconds: 0 });
});

test('a quiet account behind a flood goes after one of the flood tasks that came first, not after all of them', () => {
  const flood = { weight: 1, waiting: 120, earlier: 120 };
  expect(estimateQueue(state({ others: [flood], running: 4 })).position).toBe(2);
  // Its own third prediction goes after three of the flood's and its own two.
  expect(estimateQueue(state({ mine: { weight: 1, earlier: 2 }, others: [flood], running: 4 })).position).toBe(6);
});

test('a tie goes to the task that arrived first', () => {
  const later = { weight: 1, waiting: 5, earlier: 0 };
  expect(estimateQueue(state({ others: [later], running: 4 })).position).toBe(1);
});

test('weights: a key of weight 2 gets two turns for each of a weight-1 key', () => {
  const heavy = { weight: 2, waiting: 50, earlier: 50 };
  expect(estimateQueue(state({ others: [heavy], running: 4 })).aheadAll).toBe(2);
  // Its own second task (virtual time 1) ties with the light key's first, which came earlier; its third goes before the light key's second.
  const light = { weight: 1, waiting: 50, earlier: 50 };
  expect(estimateQueue(state({ mine: { weight: 2, earlier: 1 }, others: [light], running: 4 })).aheadAll).toBe(2);
  expect(estimateQueue(state({ mine: { weight: 2, earlier: 2 }, others: [light], running: 4 })).aheadAll).toBe(3);
});

test('another key with fewer waiting than its share puts only those ahead', () => {
  const small = { weight: 1, waiting: 1, earlier: 1 };
  expect(estimateQueue(state({ mine: { weight: 1, earlier: 9 }, others: [small], running: 4 })).aheadAll).toBe(10);
});

test('ETA: slots free at slots / service time a second once every slot is busy', () => {
  const flood = { weight: 1, waiting: 100, earlier: 100 };
  // At virtual time 3: its own 2, the flood tasks at 1 and 2, and the one at 3 (a tie that came first).
  const estimate = estimateQueue(state({ mine: { weight: 1, earlier: 2 }, others: [flood], running: 4, slots: 4, serviceSeconds: 2 }));
  expect(estimate.aheadAll).toBe(5);
  expect(estimate.etaSeconds).toBe(3); // 6 completions × 2 s ÷ 4 slots
});

test('ETA: each slot passes to its next task a service time plus its measured hand-over apart', () => {
  const flood = { weight: 1, waiting: 100, earlier: 100 };
  const handover = (handoverSeconds: number | null) =>
    estimateQueue(state({ mine: { weight: 1, earlier: 2 }, others: [flood], running: 4, slots: 4, serviceSeconds: 2, handoverSeconds }))
      .etaSeconds;
  expect(handover(0.5)).toBe(3.8); // 6 completions at 4 slots ÷ 2.5 s
  expect(handover(null)).toBe(3);
});

test('ETA: free slots take the first ones at once', () => {
  expect(estimateQueue(state({ others: [{ weight: 1, waiting: 1, earlier: 1 }], running: 2, slots: 4 })).etaSeconds).toBe(0);
});

test('no ETA before anything was measured or while no node serves the version', () => {
  expect(estimateQueue(state({ serviceSeconds: null })).etaSeconds).toBeNull();
  expect(estimateQueue(state({ slots: 0 })).etaSeconds).toBeNull();
});
