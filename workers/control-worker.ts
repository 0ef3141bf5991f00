/** Entry point of the control worker: prediction workflows and the cheap activities. */
import { NativeConnection, Runtime, Worker, makeTelemetryFilterString } from '@temporalio/worker';
import { closeDb, createDb } from '../db/client';
import { createControlActivities } from '../activities/control';
import { createWebhookActivities, parseSchedule } from '../activities/webhooks';
import { predictionJson } from '../api/prediction-json';
import { snapshotToRow } from '../db/predictions';
import { UrlSigner } from '../lib/signing';
import { config } from '../lib/config';
import { createLogger } from '../lib/logger';
import { serveMetrics } from '../lib/metrics';
import { announceReady } from '../lib/ready';

async function main() {
  const c = config();
  const logger = createLogger('control-worker', c.LOG_LEVEL);
  Runtime.install({ telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'WARN' }) } } });
  const db = createDb(c.DATABASE_URL);
  const connection = await NativeConnection.connect({ address: c.TEMPORAL_ADDRESS });
  const metrics = c.KILN_METRICS_PORT ? serveMetrics(c.KILN_METRICS_PORT, c.HOST) : undefined;
  const urls = { baseUrl: c.KILN_PUBLIC_URL ?? `http://${c.HOST}:${c.PORT}`, signer: new UrlSigner(c.KILN_URL_SIGNING_KEY) };
  const worker = await Worker.create({
    connection,
    namespace: c.TEMPORAL_NAMESPACE,
    taskQueue: c.KILN_CONTROL_QUEUE,
    workflowsPath: require.resolve('../workflows'),
    // Keep the backlog in Temporal's fair queues, not in this process: a worker that pulls in
    // hundreds of tasks serves them first come, first served, whatever their fairness key.
    maxConcurrentWorkflowTaskExecutions: c.KILN_CONTROL_CONCURRENCY,
    maxConcurrentLocalActivityExecutions: c.KILN_CONTROL_CONCURRENCY,
    maxConcurrentActivityTaskExecutions: c.KILN_CONTROL_CONCURRENCY * 4,
    activities: {
      ...createControlActivities({ db }),
      ...createWebhookActivities({
        db,
        allowPrivate: c.KILN_WEBHOOK_ALLOW_PRIVATE,
        scheduleMs: parseSchedule(c.KILN_WEBHOOK_RETRY_SCHEDULE),
        maxAttempts: c.KILN_WEBHOOK_MAX_ATTEMPTS,
        render: (d) => predictionJson(snapshotToRow(d.snapshot), urls),
      }),
    },
  });
  logger.info({ taskQueue: c.KILN_CONTROL_QUEUE, namespace: c.TEMPORAL_NAMESPACE }, 'control worker up');
  announceReady();
  await worker.run();
  metrics?.close();
  await connection.close();
  await closeDb(db);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
