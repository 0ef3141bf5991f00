/** min_tokens where llama.cpp ends early: more calls from the text so far, the whole distribution after a stall. */
import { type CompleteMore, topUpToMinTokens } from '../../engines/llama/min-tokens';

/** A completion stand-in: each call adds the next count of tokens and answers the next stop reason. */
function fakeCompletion(outputTokens: number, script: Array<{ adds: number; stopReason: string }>) {
  const progress = { outputTokens };
  const calls: Array<Parameters<CompleteMore>[0]> = [];
  const more: CompleteMore = async (overrides) => {
    calls.push(overrides);
    const step = script.shift();
    if (!step) throw new Error('called more often than scripted');
    progress.outputTokens += step.adds;
    return step.stopReason;
  };
  return { progress, calls, more };
}

const limits = { max_tokens: 20, min_tokens: 10 };
const live = () => new AbortController().signal;

test('nothing more is asked for when llama.cpp ended for another reason than an end token', async () => {
  const f = fakeCompletion(3, []);
  expect(await topUpToMinTokens('maxTokens', f.progress, limits, 0, live(), f.more)).toBe('maxTokens');
  expect(await topUpToMinTokens('abort', f.progress, limits, 0, live(), f.more)).toBe('abort');
  expect(f.calls).toEqual([]);
});

test('nothing more is asked for once min_tokens is reached', async () => {
  const f = fakeCompletion(10, []);
  expect(await topUpToMinTokens('eogToken', f.progress, limits, 0, live(), f.more)).toBe('eogToken');
  expect(f.calls).toEqual([]);
});

test('nothing more is asked for once the generation is aborted', async () => {
  const f = fakeCompletion(3, []);
  const aborted = new AbortController();
  aborted.abort();
  expect(await topUpToMinTokens('eogToken', f.progress, limits, 0, aborted.signal, f.more)).toBe('eogToken');
  expect(f.calls).toEqual([]);
});

test('an early end after some tokens carries on with the same sampling, up to max_tokens', async () => {
  const f = fakeCompletion(3, [{ adds: 8, stopReason: 'eogToken' }]);
  expect(await topUpToMinTokens('eogToken', f.progress, limits, 0, live(), f.more)).toBe('eogToken');
  expect(f.calls).toEqual([{ maxTokens: 17 }]);
  expect(f.progress.outputTokens).toBe(11);
});

test('a first call that added nothing (past the continued text) draws the rest up to min_tokens from the whole distribution', async () => {
  const f = fakeCompletion(4, [{ adds: 6, stopReason: 'maxTokens' }]);
  expect(await topUpToMinTokens('eogToken', f.progress, limits, 4, live(), f.more)).toBe('eogToken');
  expect(f.calls).toEqual([{ topP: 1, maxTokens: 6 }]);
});

test('a top-up that reaches max_tokens ends as maxTokens', async () => {
  const f = fakeCompletion(0, [{ adds: 5, stopReason: 'eogToken' }]);
  const equal = { max_tokens: 5, min_tokens: 5 };
  expect(await topUpToMinTokens('eogToken', f.progress, equal, 0, live(), f.more)).toBe('maxTokens');
  expect(f.calls).toEqual([{ topP: 1, maxTokens: 5 }]);
});

test('a call that adds nothing is followed by an unbiased top-up; a top-up that adds nothing ends short', async () => {
  const f = fakeCompletion(2, [
    { adds: 0, stopReason: 'eogToken' },
    { adds: 3, stopReason: 'maxTokens' },
    { adds: 1, stopReason: 'eogToken' },
    { adds: 0, stopReason: 'eogToken' },
    { adds: 0, stopReason: 'maxTokens' },
  ]);
  expect(await topUpToMinTokens('eogToken', f.progress, limits, 0, live(), f.more)).toBe('eogToken');
  expect(f.calls).toEqual([{ maxTokens: 18 }, { topP: 1, maxTokens: 8 }, { maxTokens: 15 }, { maxTokens: 14 }, { topP: 1, maxTokens: 4 }]);
  expect(f.progress.outputTokens).toBe(6);
});

test('a top-up stops once its signal is aborted between calls', async () => {
  const controller = new AbortController();
  const f = fakeCompletion(2, [{ adds: 1, stopReason: 'eogToken' }]);
  const more: CompleteMore = async (o) => {
    const reason = await f.more(o);
    controller.abort();
    return reason;
  };
  expect(await topUpToMinTokens('eogToken', f.progress, limits, 0, controller.signal, more)).toBe('eogToken');
  expect(f.calls).toHaveLength(1);
});
