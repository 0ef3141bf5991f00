/**
 * What the llama.cpp engine loads, on the engine worker's /metrics: a LoRA adapter runs on its
 * base's weights, so adapters count as contexts and only bases as weight loads. And where
 * prompts' cached tokens came from (the KV tiers), with the bytes each snapshot tier holds.
 */
import client from 'prom-client';
import { registry } from '../../lib/metrics';
import type { LlamaLoadObserver } from './engine';
import type { CacheTier } from './generation-result';

const modelLoads = new client.Counter({
  name: 'kiln_llama_model_loads_total',
  help: 'GGUF models loaded into memory (weights), by version',
  labelNames: ['version'],
  registers: [registry],
});

const adapterLoads = new client.Counter({
  name: 'kiln_llama_adapter_loads_total',
  help: 'LoRA adapters applied to a loaded base model (a context each, no copy of the weights), by adapter and base version',
  labelNames: ['version', 'base'],
  registers: [registry],
});

const cacheLookups = new client.Counter({
  name: 'kiln_kv_cache_lookups_total',
  help: "Generations by where their prompt's cached tokens came from: live (a sequence held them), disk or object (a KV snapshot), none",
  labelNames: ['tier'],
  registers: [registry],
});

const cacheTokens = new client.Counter({
  name: 'kiln_kv_cache_tokens_total',
  help: 'Prompt tokens served from a cache tier instead of evaluated; with tier="none", the prompt tokens evaluated afresh',
  labelNames: ['tier'],
  registers: [registry],
});

const cacheHitRatio = new client.Gauge({
  name: 'kiln_kv_cache_hit_ratio',
  help: "Of this process's generations so far, the share whose cached prompt tokens came from each tier (none: a miss)",
  labelNames: ['tier'],
  registers: [registry],
});

const restoredBytes = new client.Counter({
  name: 'kiln_kv_snapshot_restored_bytes_total',
  help: 'Bytes of KV snapshots loaded into a sequence, by the tier they came from',
  labelNames: ['tier'],
  registers: [registry],
});

const snapshotBytes = new client.Gauge({
  name: 'kiln_kv_snapshot_bytes',
  help: "Bytes of KV snapshots held in a tier: disk (this node's), object (the shared tier, as last listed by this node)",
  labelNames: ['tier'],
  registers: [registry],
});

const TIERS: CacheTier[] = ['live', 'disk', 'object', 'none'];
const lookups: Record<CacheTier, number> = { live: 0, disk: 0, object: 0, none: 0 };

export const llamaLoadMetrics: LlamaLoadObserver = {
  modelLoaded: (version) => modelLoads.inc({ version }),
  adapterLoaded: (version, base) => adapterLoads.inc({ version, base }),
  promptCached: (tier, cached, prompt, bytes) => {
    cacheLookups.inc({ tier });
    lookups[tier] += 1;
    const total = TIERS.reduce((sum, t) => sum + lookups[t], 0);
    for (const t of TIERS) cacheHitRatio.set({ tier: t }, lookups[t] / total);
    if (tier === 'none') cacheTokens.inc({ tier }, prompt);
    else cacheTokens.inc({ tier }, cached);
    if (bytes > 0) restoredBytes.inc({ tier }, bytes);
  },
};

/** The bytes each snapshot tier holds, as the stores report them. */
export const kvSnapshotBytes = (tier: 'disk' | 'object') => (bytes: number) => snapshotBytes.set({ tier }, bytes);
