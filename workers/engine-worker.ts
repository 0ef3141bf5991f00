/** Entry point of an engine worker process: one per GPU host (or per GPU). */
import path from 'node:path';
import { makeTelemetryFilterString, NativeConnection, Runtime } from '@temporalio/worker';
import { InflightLedger } from '../activities/inflight-ledger';
import { closeDb, createDb } from '../db/client';
import { LlamaEngine } from '../engines/llama/engine';
import { KvObjectTier } from '../engines/llama/kv-object-tier';
import { KvSnapshotStore } from '../engines/llama/kv-snapshots';
import { kvSnapshotBytes, llamaLoadMetrics } from '../engines/llama/metrics';
import { ModelCache } from '../engines/model-cache';
import { OnnxEngine } from '../engines/onnx/engine';
import { EchoFixtureEngine } from '../fixtures/echo-engine';
import { enableFixtureTasks } from '../fixtures/enable';
import { type Config, config } from '../lib/config';
import { createLogger, type Logger } from '../lib/logger';
import { serveMetrics } from '../lib/metrics';
import { kilnDataConverter } from '../lib/payload-refs';
import { surviveRestartsOfPostgres } from '../lib/postgres-socket-race';
import { announceState, RESTART_EXIT_CODE } from '../lib/ready';
import { urlSignerFromConfig } from '../lib/signing';
import { Storage } from '../lib/storage';
import { startTracing } from '../lib/tracing';
import { EngineNode } from './engine-node';
import { engineNodeSettings } from './engine-node-settings';
import { temporalLogger } from './temporal-logger';

/**
 * The KV snapshot tiers (disk, then the object store) where they have a budget; none: no
 * snapshots. The disk tier reads what earlier processes left at once, not at the first restore:
 * after an engine's restart that restore is the retried prediction's, which waits for it.
 */
function kvSnapshotsOf(c: Config, storage: Storage, logger: Logger): KvSnapshotStore | undefined {
  if (c.KILN_KV_SNAPSHOT_DISK_MB <= 0) return undefined;
  const store = new KvSnapshotStore({
    dir: path.join(c.KILN_DATA_DIR, 'kv', c.KILN_NODE_ID),
    budgetBytes: c.KILN_KV_SNAPSHOT_DISK_MB * 2 ** 20,
    minTokens: c.KILN_KV_SNAPSHOT_MIN_TOKENS,
    onBytes: kvSnapshotBytes('disk'),
    objects:
      c.KILN_KV_SNAPSHOT_OBJECT_MB > 0
        ? new KvObjectTier(storage, {
            budgetBytes: c.KILN_KV_SNAPSHOT_OBJECT_MB * 2 ** 20,
            minTokens: c.KILN_KV_SNAPSHOT_MIN_TOKENS,
            onBytes: kvSnapshotBytes('object'),
          })
        : undefined,
  });
  store.open().catch((err: Error) => logger.warn({ error: err.message }, 'could not read the KV snapshots on disk'));
  return store;
}

function llamaEngineOf(c: Config, storage: Storage, logger: Logger): LlamaEngine {
  return new LlamaEngine(
    {
      gpu: c.KILN_ENGINE_GPU,
      contextSize: c.KILN_ENGINE_CONTEXT_SIZE,
      sequences: c.KILN_ENGINE_SEQUENCES,
      threads: c.KILN_ENGINE_THREADS,
      fixtures: c.KILN_ENABLE_FIXTURES,
      sourceBuild: c.KILN_LLAMA_SOURCE_BUILD,
      snapshots: kvSnapshotsOf(c, storage, logger),
      onBackend: ({ binary, fallback, hint, gpu }) => {
        if (fallback) logger.warn({ binary, gpu, fallback }, 'llama.cpp: the source build was asked for; running the prebuilt');
        else logger.info({ binary, gpu, threads: c.KILN_ENGINE_THREADS, ...(hint && { hint }) }, 'llama.cpp loaded');
        announceState('llama', { binary, gpu, threads: c.KILN_ENGINE_THREADS, sourceBuild: c.KILN_LLAMA_SOURCE_BUILD });
      },
    },
    llamaLoadMetrics,
  );
}

async function main() {
  const c = config();
  if (c.KILN_ENABLE_FIXTURES) enableFixtureTasks();
  const logger = createLogger('engine-worker', c.LOG_LEVEL);
  surviveRestartsOfPostgres(logger);
  Runtime.install({
    logger: temporalLogger(logger),
    telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'WARN' }) } },
  });
  const db = createDb(c.DATABASE_URL, { max: 4 });
  const tracing = startTracing('kiln-engine-worker', c.OTEL_EXPORTER_OTLP_ENDPOINT);
  const connection = await NativeConnection.connect({ address: c.TEMPORAL_ADDRESS });
  const metrics = c.KILN_METRICS_PORT ? serveMetrics(c.KILN_METRICS_PORT, c.HOST) : undefined;
  const storage = Storage.fromConfig(c);
  const llama = llamaEngineOf(c, storage, logger);
  // Engines parse untrusted model files: they hold only the file-URL and file-reference keys.
  const signer = urlSignerFromConfig(c, ['file', 'ref']);
  const cache = new ModelCache(path.join(c.KILN_DATA_DIR, 'cache', c.KILN_NODE_ID), storage, {
    rangedMinBytes: c.KILN_MODEL_RANGED_MIN_MB * 2 ** 20,
    streams: c.KILN_MODEL_DOWNLOAD_STREAMS,
  });
  const node = new EngineNode(engineNodeSettings(c), {
    db,
    connection,
    plugins: tracing ? [tracing.plugin] : [],
    llama,
    cache,
    logger,
    storage,
    // Inputs over the inline limit arrive by reference: the engine's S3 session reads and writes payloads/ only for them.
    dataConverter: kilnDataConverter(storage, c),
    echoFixture: c.KILN_ENABLE_FIXTURES ? new EchoFixtureEngine() : undefined,
    inflight: new InflightLedger(path.join(c.KILN_DATA_DIR, 'inflight', `${c.KILN_NODE_ID}.json`), c.KILN_NODE_ID),
    onnx: {
      engine: new OnnxEngine({ gpu: c.KILN_ENGINE_GPU === 'false' ? 'false' : 'auto', threads: c.KILN_ENGINE_THREADS }),
      storage,
      signer,
      fetch: {
        storage,
        signer,
        allowPrivate: c.KILN_FETCH_ALLOW_PRIVATE,
        maxBytes: c.KILN_FETCH_MAX_BYTES,
        timeoutMs: c.KILN_FETCH_TIMEOUT_MS,
      },
    },
  });
  let stopping = false;
  const stop = async () => {
    // A restart for a new llama.cpp build is already stopping the node.
    if (stopping || node.restartRequested) return;
    stopping = true;
    logger.info('engine node shutting down');
    await node.shutdown();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await node.run();
  if (!node.restartRequested) await stop();
  await llama.dispose();
  metrics?.close();
  await connection.close();
  await closeDb(db);
  await tracing?.shutdown();
  // Nothing is left to finish: whatever handle a library keeps open must not hold the restart up.
  if (node.restartRequested) process.exit(RESTART_EXIT_CODE);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
