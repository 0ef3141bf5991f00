/**
 * A worker process of the floor: `workflows` (like the control worker) or `activities` (like an
 * engine node's model queue), with the same SDK, runtime settings and worker options as Kiln's.
 *   node --import tsx bench/floor/worker.ts workflows|activities <task queue>
 * Prints `ready` once it polls; stops on SIGTERM.
 */
import { DefaultLogger, makeTelemetryFilterString, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { controlWorkerTuning, modelWorkerTuning } from '../../workers/worker-tuning';
import { floorActivities } from './activities';

async function main() {
  const [role, taskQueue] = process.argv.slice(2);
  if ((role !== 'workflows' && role !== 'activities') || !taskQueue) throw new Error('usage: worker.ts workflows|activities <task queue>');
  // As the control and engine workers do: only warnings are logged.
  Runtime.install({
    logger: new DefaultLogger('WARN'),
    telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'WARN' }) } },
  });
  const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' });
  const namespace = process.env.TEMPORAL_NAMESPACE ?? 'default';
  const worker =
    role === 'workflows'
      ? await Worker.create({
          connection,
          namespace,
          taskQueue,
          workflowsPath: require.resolve('./workflow'),
          ...controlWorkerTuning(Number(process.env.KILN_CONTROL_CONCURRENCY ?? 8)),
        })
      : await Worker.create({
          connection,
          namespace,
          taskQueue,
          activities: floorActivities,
          // kiln/echo-fixture's sequences.
          ...modelWorkerTuning(8),
        });
  process.once('SIGTERM', () => worker.shutdown());
  const running = worker.run();
  console.log('ready');
  await running;
  await connection.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
