import { expectedDurations, longestFirst } from '../../infra/test-order';

const f = (file: string, seconds: number) => ({ file, seconds });

test('longest first; equal durations keep their order', () => {
  expect(longestFirst([f('a', 10), f('b', 70), f('c', 30), f('d', 30), f('e', 20)])).toEqual(['b', 'c', 'd', 'e', 'a']);
  expect(longestFirst([])).toEqual([]);
});

test('a file never timed is expected to take the median of the known durations', () => {
  expect(expectedDurations(['x', 'new'], { x: 40, y: 2, z: 9 })).toEqual([f('x', 40), f('new', 9)]);
  expect(expectedDurations(['new'], {})).toEqual([f('new', 5)]);
});
