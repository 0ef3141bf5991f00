/** Entry point of the control worker: prediction workflows and the cheap activities. */
import { NativeConnection, Runtime, Worker, makeTelemetryFilterString } from '@temporalio/worker';
import { closeDb, createDb } from '../db/client';
import { createControlActivities } from '../activities/control';
import { config } from '../lib/config';
import { createLogger } from '../lib/logger';
import { announceReady } from '../lib/ready';

async function main() {
  const c = config();
  const logger = createLogger('control-worker', c.LOG_LEVEL);
  Runtime.install({ telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'WARN' }) } } });
  const db = createDb(c.DATABASE_URL);
  const connection = await NativeConnection.connect({ address: c.TEMPORAL_ADDRESS });
  const worker = await Worker.create({
    connection,
    namespace: c.TEMPORAL_NAMESPACE,
    taskQueue: c.KILN_CONTROL_QUEUE,
    workflowsPath: require.resolve('../workflows'),
    activities: createControlActivities({ db, maxRunningPerAccount: c.KILN_MAX_RUNNING_PER_ACCOUNT }),
  });
  logger.info({ taskQueue: c.KILN_CONTROL_QUEUE, namespace: c.TEMPORAL_NAMESPACE }, 'control worker up');
  announceReady();
  await worker.run();
  await connection.close();
  await closeDb(db);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
