/** The API's settings that come from configuration alone, as createApp takes them. */
import type { Config } from '../lib/config';
import { publicBaseUrl } from '../lib/public-url';
import type { AppDeps } from './app';

export type AppSettings = Pick<
  AppDeps,
  | 'controlQueue'
  | 'allowPrivateWebhooks'
  | 'publicUrl'
  | 'metricsToken'
  | 'temporalUi'
  | 'temporalNamespace'
  | 'fetch'
  | 'batches'
  | 'webhookLimits'
  | 'connectionLimits'
  | 'resources'
>;

export function appSettingsOf(c: Config): AppSettings {
  return {
    controlQueue: c.KILN_CONTROL_QUEUE,
    allowPrivateWebhooks: c.KILN_WEBHOOK_ALLOW_PRIVATE,
    publicUrl: publicBaseUrl(c),
    metricsToken: c.KILN_METRICS_TOKEN,
    temporalUi: c.KILN_TEMPORAL_UI_URL ? { url: c.KILN_TEMPORAL_UI_URL, namespace: c.TEMPORAL_NAMESPACE } : undefined,
    temporalNamespace: c.TEMPORAL_NAMESPACE,
    fetch: { allowPrivate: c.KILN_FETCH_ALLOW_PRIVATE, maxBytes: c.KILN_FETCH_MAX_BYTES, timeoutMs: c.KILN_FETCH_TIMEOUT_MS },
    batches: {
      parallelism: c.KILN_BATCH_PARALLELISM,
      chunksPerRun: c.KILN_BATCH_CHUNKS_PER_RUN,
      maxInputBytes: c.KILN_BATCH_INPUT_MAX_BYTES,
    },
    webhookLimits: {
      rotationsPerMinute: c.KILN_WEBHOOK_ROTATIONS_PER_MINUTE,
      redeliveriesPerMinute: c.KILN_WEBHOOK_REDELIVERIES_PER_MINUTE,
    },
    connectionLimits: {
      maxOpenStreams: c.KILN_MAX_OPEN_STREAMS,
      maxWaitingRequests: c.KILN_MAX_WAITING_REQUESTS,
      recheckMs: c.KILN_OPEN_CONNECTION_RECHECK_MS,
    },
    resources: {
      defaultContextSize: c.KILN_ENGINE_CONTEXT_SIZE,
      defaultSequences: c.KILN_ENGINE_SEQUENCES,
      maxContextSize: c.KILN_MAX_CONTEXT_SIZE,
      maxSequences: c.KILN_MAX_SEQUENCES,
      pinnedNodeShare: c.KILN_PINNED_NODE_SHARE,
      prefillSplitMinTokens: c.KILN_PREFILL_SPLIT_MIN_TOKENS,
    },
  };
}
