/**
 * The decode gatherer on a stand-in context (a test fixture with node-llama-cpp's internal decode
 * entry): requests are handed on as whole groups, ordered by sequence id.
 */
import type { LlamaContext } from 'node-llama-cpp';
import { DecodeGatherer } from '../../engines/llama/decode-gatherer';

type Request = { sequenceId: number };

/** What node-llama-cpp's context would see: each call to its decode entry, in order. */
function fixtureContext() {
  const calls: Array<{ sequenceId: number }> = [];
  const context = {
    _decodeTokens: async (request: Request, mapper: unknown) => {
      calls.push({ sequenceId: request.sequenceId });
      return { decoded: request.sequenceId, mapper };
    },
  };
  return { context, calls };
}

const decode = (context: unknown, sequenceId: number) =>
  (context as { _decodeTokens: (r: Request, m: unknown) => Promise<{ decoded: number; mapper: unknown }> })._decodeTokens(
    { sequenceId },
    `mapper-${sequenceId}`,
  );

afterEach(() => jest.useRealTimers());

test('a context without the internal entry is left as it was', () => {
  expect(new DecodeGatherer(5).install({} as LlamaContext)).toBe(false);
});

test('the first request goes on at once; then a group waits for every sequence of the last one, and goes in sequence order', async () => {
  const { context, calls } = fixtureContext();
  const gatherer = new DecodeGatherer(60_000);
  expect(gatherer.install(context as unknown as LlamaContext)).toBe(true);

  // Nothing is expected yet: the first request goes on alone, at once.
  const first = decode(context, 2);
  expect(calls.map((c) => c.sequenceId)).toEqual([2]);
  await first;
  // 2 is expected back: 1 and 0 (new prompts) wait for it, then all three go, in sequence order.
  const results = [decode(context, 1), decode(context, 0)];
  await Promise.resolve();
  expect(calls).toHaveLength(1);
  results.push(decode(context, 2));
  const decoded = await Promise.all(results);
  expect(calls.map((c) => c.sequenceId)).toEqual([2, 0, 1, 2]);
  // Every caller gets its own result, with its own arguments passed through.
  expect(decoded).toEqual([
    { decoded: 1, mapper: 'mapper-1' },
    { decoded: 0, mapper: 'mapper-0' },
    { decoded: 2, mapper: 'mapper-2' },
  ]);

  // Now {0,1,2} are expected: two that are back are held until the third asks again or leaves.
  const held = [decode(context, 1), decode(context, 0)];
  await Promise.resolve();
  expect(calls).toHaveLength(4);
  gatherer.leave(2);
  await Promise.all(held);
  expect(calls.slice(4).map((c) => c.sequenceId)).toEqual([0, 1]);
  expect(gatherer.stats).toEqual({ groups: 3, requests: 6, timeouts: 0 });
  gatherer.dispose();
});

test('a sequence that neither asks again nor leaves holds the others only for the wait', async () => {
  const { context, calls } = fixtureContext();
  const gatherer = new DecodeGatherer(20);
  gatherer.install(context as unknown as LlamaContext);
  await Promise.all([decode(context, 0)]);
  // Seed a group of {0,1}: 1 joins while 0 is expected.
  const first = [decode(context, 1), decode(context, 0)];
  await Promise.all(first);
  calls.length = 0;
  const t0 = performance.now();
  await decode(context, 0);
  expect(performance.now() - t0).toBeGreaterThanOrEqual(15);
  expect(calls.map((c) => c.sequenceId)).toEqual([0]);
  expect(gatherer.stats.timeouts).toBe(1);
  gatherer.dispose();
});

test('dispose hands on what is held, so no caller waits forever', async () => {
  const { context } = fixtureContext();
  const gatherer = new DecodeGatherer(60_000);
  gatherer.install(context as unknown as LlamaContext);
  await decode(context, 0);
  const held = decode(context, 1);
  gatherer.dispose();
  await expect(held).resolves.toEqual({ decoded: 1, mapper: 'mapper-1' });
});

test('the wait starts when the last group decode comes back, not before: a long decode does not split the next group', async () => {
  // Fake time from the start, so that no wait armed before it could escape it; the gatherer's microtasks stay real.
  jest.useFakeTimers({ doNotFake: ['queueMicrotask', 'nextTick'] });
  const calls: number[] = [];
  const pending: Array<() => void> = [];
  const context = {
    _decodeTokens: (request: Request) =>
      new Promise((resolve) => {
        calls.push(request.sequenceId);
        pending.push(() => resolve(request.sequenceId));
      }),
  };
  const gatherer = new DecodeGatherer(10);
  gatherer.install(context as unknown as LlamaContext);
  const first = decode(context, 0);
  const second = decode(context, 1);
  // Sequence 0's decode takes longer than the wait (four times over, in fake time): no wait is
  // armed, and 1 is still held for it.
  await jest.advanceTimersByTimeAsync(40);
  expect(jest.getTimerCount()).toBe(0);
  expect(calls).toEqual([0]);
  pending.shift()!();
  await first;
  // Back from its decode, 0 asks again within the wait: 0 and 1 go together.
  const third = decode(context, 0);
  await Promise.resolve();
  expect(calls).toEqual([0, 0, 1]);
  pending.splice(0).forEach((done) => done());
  await Promise.all([second, third]);
  expect(gatherer.stats.timeouts).toBe(0);
  gatherer.dispose();
});
