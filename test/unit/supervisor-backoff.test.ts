/** The supervisor's restart backoff. */
import { backoffAfterCrash, FIRST_DELAY_MS, MAX_DELAY_MS, STABLE_MS } from '../../infra/supervisor-backoff';

test('a first crash restarts at once; crashes in a row after it double the wait, up to the cap', () => {
  let failures = 0;
  const delays: number[] = [];
  for (let i = 0; i < 10; i++) {
    const next = backoffAfterCrash(100, failures);
    failures = next.failures;
    delays.push(next.delayMs);
  }
  expect(delays.slice(0, 5)).toEqual([0, FIRST_DELAY_MS, 2 * FIRST_DELAY_MS, 4 * FIRST_DELAY_MS, 8 * FIRST_DELAY_MS]);
  expect(delays.at(-1)).toBe(MAX_DELAY_MS);
  expect(delays.every((d, i) => i === 0 || d >= delays[i - 1])).toBe(true);
});

test('a stable run starts the count again', () => {
  expect(backoffAfterCrash(STABLE_MS, 6)).toEqual({ failures: 1, delayMs: 0 });
  expect(backoffAfterCrash(STABLE_MS - 1, 6).failures).toBe(7);
});
