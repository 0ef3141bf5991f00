/** Placement policy: which node serves or loads a version, and when a replica is added. */
import {
  coldNodeAvoiding,
  coldNodeFor,
  freeBytes,
  memoryNeeded,
  type NodeCapacity,
  placementCandidates,
  replicaHolders,
  replicaNodeFor,
  replicaReason,
  servingNodes,
} from '../../domain/node-placement';

const GiB = 2 ** 30;
const node = (id: string, memoryGiB: number, loaded: Array<[string, number]> = []): NodeCapacity => ({
  id,
  memoryBytes: memoryGiB * GiB,
  loaded: loaded.map(([versionId, gib]) => ({ versionId, memoryBytes: gib * GiB })),
});

test('free memory is what the loaded versions leave', () => {
  expect(
    freeBytes(
      node('a', 16, [
        ['v1', 4],
        ['v2', 2],
      ]),
    ),
  ).toBe(10 * GiB);
});

test('nodes that failed the prediction are a last resort', () => {
  const live = [node('a', 8), node('b', 8)];
  expect(placementCandidates(live, ['a']).map((n) => n.id)).toEqual(['b']);
  expect(placementCandidates(live, ['a', 'b']).map((n) => n.id)).toEqual(['a', 'b']);
  expect(servingNodes([node('a', 8, [['v1', 1]]), node('b', 8)], 'v1').map((n) => n.id)).toEqual(['a']);
});

test('a cold version goes to the fullest node with room (best fit), not the emptiest', () => {
  const picked = coldNodeFor([node('big', 64), node('snug', 8, [['x', 5]]), node('full', 8, [['y', 7]])], { memoryBytes: 2 * GiB });
  expect(picked).toMatchObject({ node: { id: 'snug' }, need: 2 * GiB, fits: true });
});

test('a LoRA adapter prefers the node holding its base, and needs the base’s memory elsewhere', () => {
  const adapter = { memoryBytes: 1 * GiB, loraBase: 'base', baseBytes: 4 * GiB };
  const withBase = node('with-base', 16, [['base', 4]]);
  const tight = node('tight', 8, [['z', 6]]);
  expect(memoryNeeded(withBase, adapter)).toBe(1 * GiB);
  expect(memoryNeeded(tight, adapter)).toBe(5 * GiB);
  expect(coldNodeFor([tight, withBase], adapter)?.node.id).toBe('with-base');
});

test('with no room anywhere the biggest node evicts; a version bigger than any node does not fit', () => {
  const full = [node('a', 8, [['x', 8]]), node('b', 16, [['y', 16]])];
  expect(coldNodeFor(full, { memoryBytes: 4 * GiB })).toMatchObject({ node: { id: 'b' }, fits: true });
  expect(coldNodeFor(full, { memoryBytes: 32 * GiB })).toMatchObject({ node: { id: 'b' }, fits: false, need: 32 * GiB });
  expect(coldNodeFor([], { memoryBytes: 1 })).toBeUndefined();
});

test('a node the prediction failed on is tried again when it is the only one big enough, not called too small', () => {
  const live = [node('small', 8), node('big', 32, [['x', 20]])];
  expect(coldNodeAvoiding(live, ['big'], { memoryBytes: 16 * GiB })).toMatchObject({ node: { id: 'big' }, fits: true });
  expect(coldNodeAvoiding(live, ['big'], { memoryBytes: 4 * GiB })).toMatchObject({ node: { id: 'small' }, fits: true });
  expect(coldNodeAvoiding(live, ['big'], { memoryBytes: 64 * GiB })).toMatchObject({ node: { id: 'big' }, fits: false });
});

test('a replica is added below min_instances, or for a backlog between one replica and max', async () => {
  const never = jest.fn(async () => 1000);
  expect(await replicaReason(0, { min: 2, max: 4 }, 4, never)).toBe('min_instances 2');
  expect(await replicaReason(0, { min: 0, max: 4 }, 4, never)).toBeUndefined();
  expect(await replicaReason(4, { min: 0, max: 4 }, 4, never)).toBeUndefined();
  expect(never).not.toHaveBeenCalled();
  expect(await replicaReason(2, { min: 0, max: 4 }, 4, async () => 8)).toBe('backlog 8 on 2 replica(s)');
  expect(await replicaReason(2, { min: 0, max: 4 }, 4, async () => 7)).toBeUndefined();
});

test('a replica goes to the fullest node with room that does not hold the version yet', () => {
  const live = [node('a', 16), node('b', 16), node('c', 16)];
  const free = new Map([
    ['a', 10 * GiB],
    ['b', 3 * GiB],
    ['c', 1 * GiB],
  ]);
  expect(replicaNodeFor(live, free, new Set(['b']), 2 * GiB)?.id).toBe('a');
  expect(replicaNodeFor(live, free, new Set(), 2 * GiB)?.id).toBe('b');
  expect(replicaNodeFor(live, free, new Set(), 11 * GiB)).toBeUndefined();
});

test('replicas of a version are the nodes that hold it and take predictions', () => {
  const prefill = { ...node('p', 16, [['v1', 2]]), role: 'prefill' };
  const holders = replicaHolders([
    node('a', 16, [
      ['v1', 2],
      ['v2', 1],
    ]),
    node('b', 16, [['v1', 2]]),
    prefill,
    node('c', 16),
  ]);
  expect([...holders.keys()].sort()).toEqual(['v1', 'v2']);
  expect([...holders.get('v1')!].sort()).toEqual(['a', 'b']);
  expect([...holders.get('v2')!]).toEqual(['a']);
});
