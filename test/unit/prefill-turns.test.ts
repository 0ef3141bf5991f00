import { PrefillTurns } from '../../engines/llama/prefill-turns';

/** Lets every settled promise's callbacks run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

test('turns are given in the order they were taken, one at a time', async () => {
  const turns = new PrefillTurns();
  const order: string[] = [];
  const first = await turns.take();
  const second = turns.take().then((giveBack) => (order.push('second'), giveBack));
  const third = turns.take().then((giveBack) => (order.push('third'), giveBack));
  await settle();
  expect(order).toEqual([]);
  first();
  await settle();
  expect(order).toEqual(['second']);
  (await second)();
  await settle();
  expect(order).toEqual(['second', 'third']);
  (await third)();
});

test('a turn whose signal aborts while it waits rejects, and the turns after it still wait for the ones before', async () => {
  const turns = new PrefillTurns();
  const first = await turns.take();
  const abort = new AbortController();
  const second = turns.take(abort.signal);
  let thirdGiven = false;
  const third = turns.take().then((giveBack) => ((thirdGiven = true), giveBack));
  abort.abort(new Error('canceled'));
  await expect(second).rejects.toThrow('canceled');
  await settle();
  expect(thirdGiven).toBe(false);
  first();
  (await third)();
  expect(thirdGiven).toBe(true);
});

test('a signal aborted already takes no turn', async () => {
  const turns = new PrefillTurns();
  await expect(turns.take(AbortSignal.abort(new Error('gone')))).rejects.toThrow('gone');
  const next = await turns.take();
  next();
});
