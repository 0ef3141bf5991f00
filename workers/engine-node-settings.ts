/** An engine node's settings from configuration alone. */
import type { Config } from '../lib/config';
import type { EngineNodeOptions } from './engine-node';

export function engineNodeSettings(c: Config): EngineNodeOptions {
  return {
    nodeId: c.KILN_NODE_ID,
    controlQueue: c.KILN_CONTROL_QUEUE,
    idleTtlMs: c.KILN_MODEL_IDLE_TTL_SECONDS * 1000,
    memoryBytes: c.KILN_NODE_MEMORY_MB * 2 ** 20,
    namespace: c.TEMPORAL_NAMESPACE,
    sequences: c.KILN_ENGINE_SEQUENCES,
    pinnedNodeShare: c.KILN_PINNED_NODE_SHARE,
    streamBatchMs: c.KILN_STREAM_BATCH_MS,
    role: c.KILN_ENGINE_ROLE,
    // The test suite counts the engine's restarts and keeps whichever build is there.
    switchToNewBuild: c.KILN_ENV !== 'test',
  };
}
