/** One account's pinned replicas hold at most a share of a node; past it they go like any idle model. */
import { pinnedVersions } from '../../workers/pinned-replicas';

const GiB = 2 ** 30;
const node = (id: string, versions: string[]) => ({ id, loaded: versions.map((versionId) => ({ versionId })) });

test('pins up to min_instances per version, by node id, and no more than the share per account', () => {
  const served = new Map([
    ['a1', 3 * GiB],
    ['a2', 3 * GiB],
    ['a3', 1 * GiB],
    ['b1', 4 * GiB],
    ['scaled', 1 * GiB],
  ]);
  const limits = new Map([
    ['a1', { min: 1, max: 1, pinnedBy: ['acc_a'] }],
    ['a2', { min: 1, max: 1, pinnedBy: ['acc_a'] }],
    ['a3', { min: 1, max: 1, pinnedBy: ['acc_a'] }],
    ['b1', { min: 1, max: 2, pinnedBy: ['acc_b'] }],
    // Pinned once, held by an earlier node: the replica here is one added for a backlog.
    ['scaled', { min: 1, max: 4, pinnedBy: ['acc_b'] }],
  ]);
  const live = [node('n1', ['scaled']), node('n2', ['a1', 'a2', 'a3', 'b1', 'scaled'])];
  const pinned = pinnedVersions({ nodeId: 'n2', nodeMemoryBytes: 16 * GiB, share: 0.5, served, limits, live });
  // acc_a: a1 (3) + a2 (3) fit in 8 GiB, a3 too (7 ≤ 8); acc_b: b1.
  expect([...pinned].sort()).toEqual(['a1', 'a2', 'a3', 'b1']);
  const tight = pinnedVersions({ nodeId: 'n2', nodeMemoryBytes: 10 * GiB, share: 0.5, served, limits, live });
  // 5 GiB each: acc_a gets a1 (3) and then a3 (1) but not a2 (3 more would be 6); acc_b's b1 (4) fits.
  expect([...tight].sort()).toEqual(['a1', 'a3', 'b1']);
});

test('a version two accounts pin is charged to the first with room', () => {
  const served = new Map([
    ['mine', 5 * GiB],
    ['shared', 2 * GiB],
  ]);
  const limits = new Map([
    ['mine', { min: 1, max: 1, pinnedBy: ['acc_a'] }],
    ['shared', { min: 1, max: 1, pinnedBy: ['acc_a', 'acc_b'] }],
  ]);
  const pinned = pinnedVersions({
    nodeId: 'n1',
    nodeMemoryBytes: 12 * GiB,
    share: 0.5,
    served,
    limits,
    live: [node('n1', ['mine', 'shared'])],
  });
  expect([...pinned].sort()).toEqual(['mine', 'shared']);
});
