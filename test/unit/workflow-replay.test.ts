/**
 * Recorded histories of every workflow type and path (test/replay/histories, written by
 * test/replay/record-histories.ts from real runs) replay against today's workflow code: a change
 * to a workflow's commands that is not guarded by `patched()` fails here, before it can break
 * runs in flight across an upgrade.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Resource } from '@opentelemetry/resources';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OpenTelemetryPlugin } from '@temporalio/interceptors-opentelemetry';
import { Worker, type WorkerPlugin } from '@temporalio/worker';
import { testWorkflowCode } from '../workflow-env';

jest.setTimeout(120_000);

const dir = path.join(__dirname, '..', 'replay', 'histories');
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .sort();

test('the recorded histories cover every workflow type', () => {
  const types = new Set(
    files.map((f) => {
      const [first] = JSON.parse(readFileSync(path.join(dir, f), 'utf8')).events;
      return first.workflowExecutionStartedEventAttributes.workflowType.name as string;
    }),
  );
  expect([...types].sort()).toEqual([
    'batchWorkflow',
    'predictionWorkflow',
    'reconcilerWorkflow',
    'replicaScalerWorkflow',
    'warmDeploymentWorkflow',
    'webhookDeliveryWorkflow',
  ]);
});

async function replayAll(plugins: WorkerPlugin[] = []) {
  const histories = files.map((f) => ({
    workflowId: f.replace(/\.json$/, ''),
    history: JSON.parse(readFileSync(path.join(dir, f), 'utf8')),
  }));
  const failures: string[] = [];
  let replayed = 0;
  // With the tracing plugin, the bundle the tracing control worker runs (its interceptors in).
  const code = testWorkflowCode(plugins.length > 0);
  for await (const result of Worker.runReplayHistories({ ...code, replayName: 'kiln-replay', plugins }, histories)) {
    replayed += 1;
    if (result.error) failures.push(`${result.workflowId}: ${result.error.message}`);
  }
  expect(failures).toEqual([]);
  expect(replayed).toBe(files.length);
}

test('every recorded history replays on the current workflow code', () => replayAll());

// Workers run the OpenTelemetry interceptors inside workflows where tracing is on (lib/tracing.ts):
// they must add no command, so histories written with and without them replay either way.
test('every recorded history replays with the tracing interceptors in the workflow', () =>
  replayAll([
    new OpenTelemetryPlugin({
      resource: new Resource({ 'service.name': 'kiln-replay' }),
      spanProcessor: new SimpleSpanProcessor(new InMemorySpanExporter()),
    }),
  ]));
