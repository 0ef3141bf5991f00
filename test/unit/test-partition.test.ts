import { partitionByDuration } from '../../infra/test-partition';

const f = (file: string, seconds: number) => ({ file, seconds });

test('longest first, each file to the lane with the least so far', () => {
  const lanes = partitionByDuration([f('a', 10), f('b', 70), f('c', 30), f('d', 40), f('e', 20)], 2);
  expect(lanes).toEqual([
    { files: ['b', 'e'], seconds: 90 },
    { files: ['d', 'c', 'a'], seconds: 80 },
  ]);
});

test('every file in exactly one lane, and no lane empty when there are fewer files than lanes', () => {
  const files = Array.from({ length: 17 }, (_, i) => f(`t${i}`, (i * 7) % 11));
  const lanes = partitionByDuration(files, 3);
  expect(lanes.flatMap((l) => l.files).sort()).toEqual(files.map((x) => x.file).sort());
  expect(partitionByDuration([f('only', 5)], 4)).toEqual([{ files: ['only'], seconds: 5 }]);
  expect(partitionByDuration([], 2)).toEqual([{ files: [], seconds: 0 }]);
});

test('the same input gives the same plan, ties in their given order', () => {
  const files = [f('x', 5), f('y', 5), f('z', 5), f('w', 5)];
  expect(partitionByDuration(files, 2)).toEqual([
    { files: ['x', 'z'], seconds: 10 },
    { files: ['y', 'w'], seconds: 10 },
  ]);
  expect(() => partitionByDuration(files, 0)).toThrow(RangeError);
});
