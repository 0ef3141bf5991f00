/** The KV cache tiers on the engine worker's /metrics: lookups, hit ratios, tokens and bytes per tier. */
import { kvSnapshotBytes, llamaLoadMetrics } from '../../engines/llama/metrics';
import { registry } from '../../lib/metrics';

const sample = async (name: string, tier: string) => {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return (metric?.values as Array<{ value: number; labels: Record<string, string> }> | undefined)?.find((v) => v.labels.tier === tier)
    ?.value;
};

test('each generation counts in its tier; hit ratios share out the lookups; bytes per tier are set', async () => {
  llamaLoadMetrics.promptCached!('object', 1990, 2000, 16 * 2 ** 20);
  llamaLoadMetrics.promptCached!('live', 500, 520, 0);
  llamaLoadMetrics.promptCached!('none', 0, 300, 0);
  llamaLoadMetrics.promptCached!('none', 0, 100, 0);
  kvSnapshotBytes('disk')(1234);
  kvSnapshotBytes('object')(5678);

  expect(await sample('kiln_kv_cache_lookups_total', 'object')).toBe(1);
  expect(await sample('kiln_kv_cache_lookups_total', 'none')).toBe(2);
  expect(await sample('kiln_kv_cache_hit_ratio', 'object')).toBeCloseTo(0.25);
  expect(await sample('kiln_kv_cache_hit_ratio', 'none')).toBeCloseTo(0.5);
  expect(await sample('kiln_kv_cache_hit_ratio', 'disk')).toBe(0);
  expect(await sample('kiln_kv_cache_tokens_total', 'object')).toBe(1990);
  expect(await sample('kiln_kv_cache_tokens_total', 'none')).toBe(400);
  expect(await sample('kiln_kv_snapshot_restored_bytes_total', 'object')).toBe(16 * 2 ** 20);
  expect(await sample('kiln_kv_snapshot_bytes', 'disk')).toBe(1234);
  expect(await sample('kiln_kv_snapshot_bytes', 'object')).toBe(5678);
  expect(await registry.metrics()).toContain('kiln_kv_cache_hit_ratio{tier="live"} 0.25');
});
