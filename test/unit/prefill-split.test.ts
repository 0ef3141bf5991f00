/** Prefill/decode split placement: which nodes a long prompt's two steps go to, counted in tokens. */
import { placementCandidates, servingNodes } from '../../domain/node-placement';
import { chooseSplit, estimatePromptTokens, type NodeLoad, type RoledNode, splitCandidate } from '../../domain/prefill-split';

const GiB = 2 ** 30;
const V = 'version-1';
const node = (id: string, role: string, load: Partial<NodeLoad> = {}, loaded = true, memoryGiB = 8): RoledNode => ({
  id,
  role,
  memoryBytes: memoryGiB * GiB,
  loaded: loaded ? [{ versionId: V, memoryBytes: GiB }] : [],
  load: { promptTokensInFlight: 0, activeSequences: 0, kvBytes: 0, ...load },
});
const split = (live: RoledNode[], excludeNodes: string[] = []) => {
  const choice = chooseSplit(live, { versionId: V, memoryBytes: GiB, excludeNodes });
  return choice && { prefill: choice.prefill.id, decode: choice.decode.id };
};

test('a prompt is estimated at four characters a token, prompt and messages alike', () => {
  expect(estimatePromptTokens({ prompt: 'x'.repeat(4000) })).toBe(1000);
  expect(estimatePromptTokens({ messages: [{ content: 'x'.repeat(10) }, { content: 'y'.repeat(6) }] })).toBe(4);
  expect(estimatePromptTokens({})).toBe(0);
});

test('a split is worth trying only for a long prompt with a prefill node and a decode node live', () => {
  const both = [node('p', 'prefill'), node('d', 'decode')];
  expect(splitCandidate(both, 2000, 1024)).toBe(true);
  expect(splitCandidate(both, 1000, 1024)).toBe(false);
  expect(splitCandidate([node('a', 'both'), node('b', 'both')], 2000, 1024)).toBe(false);
  expect(splitCandidate([node('p', 'prefill'), node('b', 'both')], 2000, 1024)).toBe(false);
});

test('no split without both roles: nodes of role both keep their work whole', () => {
  expect(split([node('a', 'both'), node('b', 'both')])).toBeUndefined();
  expect(split([node('p', 'prefill'), node('b', 'both')])).toBeUndefined();
  expect(split([node('d', 'decode'), node('b', 'both')])).toBeUndefined();
  expect(split([node('p', 'prefill'), node('d', 'decode')])).toEqual({ prefill: 'p', decode: 'd' });
});

test('prefill goes to the node with the fewest prompt tokens in flight', () => {
  const live = [
    node('p1', 'prefill', { promptTokensInFlight: 4000, activeSequences: 0 }),
    node('p2', 'prefill', { promptTokensInFlight: 1000, activeSequences: 9 }),
    node('p3', 'prefill', { promptTokensInFlight: 2000 }),
    node('d', 'decode'),
  ];
  expect(split(live)?.prefill).toBe('p2');
});

test('decode goes to the node with the fewest active sequences, then the fewest KV bytes', () => {
  const live = [
    node('p', 'prefill'),
    node('d1', 'decode', { activeSequences: 3, kvBytes: 1 }),
    node('d2', 'decode', { activeSequences: 1, kvBytes: 900 }),
    node('d3', 'decode', { activeSequences: 1, kvBytes: 100, promptTokensInFlight: 5000 }),
  ];
  expect(split(live)?.decode).toBe('d3');
});

test('on a tie a node that holds the version goes first; a cold node needs room for it', () => {
  const cold = node('p-cold', 'prefill', {}, false);
  const warm = node('p-warm', 'prefill');
  expect(split([cold, warm, node('d', 'decode')])?.prefill).toBe('p-warm');
  const full = node('p-full', 'prefill', {}, false, 0.5);
  expect(split([full, node('d', 'decode')])).toBeUndefined();
  expect(split([cold, node('d', 'decode')])?.prefill).toBe('p-cold');
});

test('a node that failed the prediction is left out', () => {
  const live = [node('p1', 'prefill'), node('p2', 'prefill', { promptTokensInFlight: 10 }), node('d', 'decode')];
  expect(split(live, ['p1'])?.prefill).toBe('p2');
  expect(split(live, ['d'])).toBeUndefined();
});

test('a node missing its load figures counts as idle', () => {
  const quiet: RoledNode = { id: 'd-new', role: 'decode', memoryBytes: 8 * GiB, loaded: [], load: null };
  expect(split([node('p', 'prefill'), node('d-busy', 'decode', { activeSequences: 2 }), quiet])?.decode).toBe('d-new');
});

test('prefill nodes take no predictions: neither warm nor cold placement picks them', () => {
  const live = [node('p', 'prefill'), node('d', 'decode'), node('b', 'both')];
  expect(servingNodes(live, V).map((n) => n.id)).toEqual(['d', 'b']);
  expect(placementCandidates(live, []).map((n) => n.id)).toEqual(['d', 'b']);
  expect(placementCandidates([node('p', 'prefill')], [])).toEqual([]);
});
