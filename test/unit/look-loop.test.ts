/**
 * The loop that runs a loop workflow's looks inside one activity (activities/look-loop.ts): every
 * look in turn, a failed one logged and passed over, an early end when a look found work,
 * heartbeats while a slow look runs, and a cancel that ends it between two looks.
 */
import { CancelledFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { lookEvery } from '../../activities/look-loop';
import { poll } from '../helpers';

const options = { intervalMs: 1, looks: 4, heartbeatMs: 10, name: 'looking' };

test('runs its looks in turn, and a failed look does not end the loop', async () => {
  let n = 0;
  const seen: number[] = [];
  const look = async () => {
    n += 1;
    if (n === 2) throw new Error('the database went away');
    return n;
  };
  await new MockActivityEnvironment().run(() => lookEvery(look, (r) => void seen.push(r), options));
  expect(n).toBe(4);
  expect(seen).toEqual([1, 3, 4]);
});

test('ends early when a look finds work for the workflow', async () => {
  let looks = 0;
  await new MockActivityEnvironment().run(() =>
    lookEvery(
      async () => (looks += 1),
      (n) => n === 2,
      options,
    ),
  );
  expect(looks).toBe(2);
});

test('heartbeats while a slow look runs, not only between looks', async () => {
  const env = new MockActivityEnvironment();
  let beats = 0;
  env.on('heartbeat', () => (beats += 1));
  let beatsDuringLook = 0;
  // The look ends once two heartbeats came while it ran (or its wait for them ran out).
  const slowLook = async () => {
    const before = beats;
    await poll(
      async () => beats - before,
      (n) => n >= 2,
      { timeoutMs: 5_000, intervalMs: 5 },
    ).catch(() => undefined);
    beatsDuringLook = beats - before;
  };
  await env.run(() => lookEvery(slowLook, () => undefined, { ...options, looks: 1 }));
  expect(beatsDuringLook).toBeGreaterThanOrEqual(2);
});

test('a cancel ends the loop between two looks', async () => {
  const env = new MockActivityEnvironment();
  let looks = 0;
  const running = env.run(() =>
    lookEvery(
      async () => (looks += 1),
      () => undefined,
      { ...options, intervalMs: 60_000, looks: 100 },
    ),
  );
  // The first look has run; the loop now sleeps before the second.
  await poll(
    async () => looks,
    (n) => n === 1,
  );
  env.cancel();
  await expect(running).rejects.toBeInstanceOf(CancelledFailure);
  expect(looks).toBe(1);
});
