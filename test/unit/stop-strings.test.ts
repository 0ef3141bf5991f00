/** Stop strings on streamed text: matched across chunks, the earliest one wins, the text before it kept. */
import { cutAtStop, endsInStopBeginning, firstStopAt, stopStringsOf } from '../../engines/llama/stop-strings';

test('no stop, one stop or several become a list', () => {
  expect(stopStringsOf(undefined)).toEqual([]);
  expect(stopStringsOf('\n')).toEqual(['\n']);
  expect(stopStringsOf(['a', 'b'])).toEqual(['a', 'b']);
});

test('a chunk with no stop string is kept whole', () => {
  expect(cutAtStop('Hello', ' world', ['END'])).toEqual({ keep: ' world', stopped: false });
  expect(cutAtStop('', 'anything', [])).toEqual({ keep: 'anything', stopped: false });
});

test('a stop string inside a chunk keeps what comes before it', () => {
  expect(cutAtStop('Hello', ' world. END more', ['END'])).toEqual({ keep: ' world. ', stopped: true });
});

test('a stop string at the very start of the output keeps nothing', () => {
  expect(cutAtStop('', 'END of it', ['END'])).toEqual({ keep: '', stopped: true });
});

test('a stop string split across chunks stops the chunk that completes it, keeping nothing of it', () => {
  expect(cutAtStop('Hello EN', 'D and on', ['END'])).toEqual({ keep: '', stopped: true });
  // The first half alone does not stop.
  expect(cutAtStop('Hello', ' EN', ['END'])).toEqual({ keep: ' EN', stopped: false });
});

test('among several stop strings the one that begins first wins, whatever their order in the list', () => {
  expect(cutAtStop('', 'one two three', ['three', 'two'])).toEqual({ keep: 'one ', stopped: true });
  // One begun in the text before the chunk wins over one wholly inside it.
  expect(cutAtStop('x </', 'stop> y', ['y', '</stop>'])).toEqual({ keep: '', stopped: true });
});

test('a stop string that begins with a space is found (llama.cpp misses it: the space is part of a word token)', () => {
  expect(cutAtStop('The end', ' Question: next', [' Question:'])).toEqual({ keep: '', stopped: true });
  expect(cutAtStop('The', ' end Question: next', [' Question:'])).toEqual({ keep: ' end', stopped: true });
});

test('a stop string wholly in the text before the chunk is not looked for again', () => {
  // The continued text of an earlier attempt may hold one: only what ends in this chunk counts.
  expect(cutAtStop('END then', ' more', ['END'])).toEqual({ keep: ' more', stopped: false });
});

test("a text ends with a stop string's beginning only where a proper beginning of one is its end", () => {
  expect(endsInStopBeginning('Fine.\n#', ['\n### Human'])).toBe(true);
  expect(endsInStopBeginning('Fine.\n', ['\n### Human'])).toBe(true);
  expect(endsInStopBeginning('Fine.\n#x', ['\n### Human'])).toBe(false);
  expect(endsInStopBeginning('anything', [])).toBe(false);
});

test('the first stop string is found where it ends after what was looked at already', () => {
  expect(firstStopAt('one two three', 0, ['three', 'two'])).toBe(4);
  expect(firstStopAt('Hello END', 9, ['END'])).toBe(-1);
  expect(firstStopAt('Hello EN', 8, ['END'])).toBe(-1);
});
