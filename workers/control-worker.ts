/** Entry point of the control worker: prediction workflows and the cheap activities. */
import { Client, Connection } from '@temporalio/client';
import { makeTelemetryFilterString, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { createBatchControlActivities } from '../activities/batch-control';
import { createControlActivities } from '../activities/control';
import { createReconcilerActivities } from '../activities/reconciler';
import { createWebhookActivities } from '../activities/webhooks';
import { predictionJson } from '../api/prediction-json';
import { closeDb, createDb } from '../db/client';
import { snapshotToRow } from '../db/predictions';
import { RECONCILER_ID, REPLICA_SCALER_ID } from '../domain/contracts';
import { config } from '../lib/config';
import { parseDurationList } from '../lib/duration';
import { createLogger } from '../lib/logger';
import { serveMetrics } from '../lib/metrics';
import { kilnDataConverter } from '../lib/payload-refs';
import { surviveRestartsOfPostgres } from '../lib/postgres-socket-race';
import { publicBaseUrl } from '../lib/public-url';
import { announceReady } from '../lib/ready';
import { secretBoxFromConfig } from '../lib/secret-box';
import { urlSignerFromConfig } from '../lib/signing';
import { Storage } from '../lib/storage';
import { startTracing } from '../lib/tracing';
import { temporalLogger } from './temporal-logger';
import { controlWorkerTuning } from './worker-tuning';
import { workflowCode } from './workflow-code';

async function main() {
  const c = config();
  const logger = createLogger('control-worker', c.LOG_LEVEL);
  surviveRestartsOfPostgres(logger);
  Runtime.install({
    logger: temporalLogger(logger),
    telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'WARN' }) } },
  });
  const db = createDb(c.DATABASE_URL);
  const tracing = startTracing('kiln-control-worker', c.OTEL_EXPORTER_OTLP_ENDPOINT);
  const plugins = tracing ? [tracing.plugin] : [];
  const connection = await NativeConnection.connect({ address: c.TEMPORAL_ADDRESS });
  const clientConnection = await Connection.connect({ address: c.TEMPORAL_ADDRESS });
  const storage = Storage.fromConfig(c);
  // One codec for the worker and the client: payloads over KILN_PAYLOAD_INLINE_MAX_BYTES go by reference.
  const dataConverter = kilnDataConverter(storage, c);
  const temporal = new Client({ connection: clientConnection, namespace: c.TEMPORAL_NAMESPACE, dataConverter, plugins });
  const metrics = c.KILN_METRICS_PORT ? serveMetrics(c.KILN_METRICS_PORT, c.HOST) : undefined;
  const urls = { baseUrl: publicBaseUrl(c), signer: urlSignerFromConfig(c, ['stream', 'file', 'ref']) };
  const secrets = secretBoxFromConfig(c);
  const worker = await Worker.create({
    connection,
    namespace: c.TEMPORAL_NAMESPACE,
    taskQueue: c.KILN_CONTROL_QUEUE,
    dataConverter,
    // The tracing plugin's workflow interceptors are in the build's traced bundle.
    ...workflowCode({ traced: plugins.length > 0 }),
    plugins,
    ...controlWorkerTuning(c.KILN_CONTROL_CONCURRENCY),
    activities: {
      ...createControlActivities({
        db,
        temporal,
        storage,
        replicas: { backlogPerReplica: c.KILN_REPLICA_BACKLOG, maxReplicas: c.KILN_MAX_REPLICAS },
      }),
      ...createReconcilerActivities({ db, temporal, storage, controlQueue: c.KILN_CONTROL_QUEUE, minAgeMs: c.KILN_RECONCILE_MIN_AGE_MS }),
      ...createBatchControlActivities({ db, temporal, storage, baseUrl: urls.baseUrl, signer: urls.signer }),
      ...createWebhookActivities({
        db,
        secrets,
        allowPrivate: c.KILN_WEBHOOK_ALLOW_PRIVATE,
        scheduleMs: parseDurationList(c.KILN_WEBHOOK_RETRY_SCHEDULE),
        maxAttempts: c.KILN_WEBHOOK_MAX_ATTEMPTS,
        render: (d) => predictionJson(snapshotToRow(d.snapshot), urls),
      }),
    },
  });
  const running = worker.run();
  // The newest control worker's code runs the scaler: a run left by an older one is replaced.
  await temporal.workflow.start('replicaScalerWorkflow', {
    workflowId: REPLICA_SCALER_ID,
    taskQueue: c.KILN_CONTROL_QUEUE,
    args: [{ intervalMs: c.KILN_REPLICA_CHECK_MS }],
    workflowIdConflictPolicy: 'TERMINATE_EXISTING',
  });
  // The same for the reconciler: one per namespace, the newest worker's code.
  await temporal.workflow.start('reconcilerWorkflow', {
    workflowId: RECONCILER_ID,
    taskQueue: c.KILN_CONTROL_QUEUE,
    args: [{ intervalMs: c.KILN_RECONCILE_INTERVAL_MS }],
    workflowIdConflictPolicy: 'TERMINATE_EXISTING',
  });
  logger.info({ taskQueue: c.KILN_CONTROL_QUEUE, namespace: c.TEMPORAL_NAMESPACE }, 'control worker up');
  announceReady();
  await running;
  await clientConnection.close();
  metrics?.close();
  await connection.close();
  await closeDb(db);
  await tracing?.shutdown();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
