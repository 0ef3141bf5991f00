/** The clock output streams flush on (activities/stream-clock.ts): one timer for all who ask in a window. */
import { atNextTick } from '../../activities/stream-clock';

test('callbacks asked for in one window run in one turn of the event loop; one taken back does not run', async () => {
  const calls: string[] = [];
  await new Promise<void>((resolve) => {
    atNextTick(20, () => {
      calls.push('a');
      // Runs after the turn that runs the callbacks: b must come before it.
      setImmediate(() => calls.push('next turn'));
    });
    const takeBack = atNextTick(20, () => calls.push('taken back'));
    atNextTick(20, () => {
      calls.push('b');
      resolve();
    });
    takeBack();
  });
  await new Promise((resolve) => setImmediate(resolve));
  expect(calls).toEqual(['a', 'b', 'next turn']);
});

test('a callback asked for from within a tick waits for the next one', async () => {
  const at: number[] = [];
  await new Promise<void>((resolve) =>
    atNextTick(20, () => {
      at.push(Date.now());
      atNextTick(20, () => {
        at.push(Date.now());
        resolve();
      });
    }),
  );
  expect(at[1] - at[0]).toBeGreaterThanOrEqual(1);
});
