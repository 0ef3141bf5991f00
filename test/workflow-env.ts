/**
 * The prediction workflow alone, with fake activities, as test/unit/*-workflow.test.ts run it
 * (activities come from factories, so the workers here get stand-ins that record what they were
 * asked).
 *
 * On a TestWorkflowEnvironment. Its time-skipping server is a separate Java-built binary that
 * `@temporalio/testing` can only download, and nothing here may download a server; so it runs on
 * the Temporal CLI's dev server that infra/install.sh builds (createLocal with its path), in real
 * time.
 */
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { type PredictionArgs, type PredictResult, predictionWorkflowId } from '../domain/contracts';
import type { PredictionSnapshot } from '../domain/prediction-snapshot';
import { KilnAccount, KilnModel, KilnStatus } from '../domain/search-attributes';
import { workflowCode } from '../workers/workflow-code';

/**
 * The workflow code for a test's worker: where the suite's stack runs the compiled build
 * (KILN_CODE=dist, as npm test sets), the bundle npm test built from these sources before any
 * test, which is what production runs; else (jest alone) workflows/ bundled here. Bundling takes
 * seconds of CPU each time, in every file that does it. `traced`: the bundle with the tracing
 * interceptors, for a worker with the OpenTelemetry plugin.
 */
export const testWorkflowCode = (traced = false) => workflowCode({ useBuild: process.env.KILN_CODE === 'dist', traced });

/** The CLI infra/install.sh builds (infra/env.sh TEMPORAL_BIN), or the one the environment names. */
function temporalCli(): string {
  const cache = process.env.KILN_CACHE ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'kiln');
  const bin = process.env.TEMPORAL_BIN ?? path.join(cache, 'bin', 'temporal-v1.5.1', 'temporal');
  if (!existsSync(bin)) throw new Error(`no Temporal CLI at ${bin}: run bash infra/install.sh first`);
  return bin;
}

export interface WorkflowTestEnv {
  env: TestWorkflowEnvironment;
  /** Runs the prediction workflow to its end with these args. */
  execute: (args: PredictionArgs) => Promise<PredictionSnapshot>;
  /** Stops the workers, then the server. */
  teardown: () => Promise<void>;
}

/**
 * A dev server, the workflows on `controlQueue` with its fake control activities, and a worker on
 * each other queue with its fake activities (an engine's queues).
 */
export async function startWorkflowEnv(controlQueue: string, control: object, queues: Record<string, object>): Promise<WorkflowTestEnv> {
  const env = await TestWorkflowEnvironment.createLocal({
    server: { executable: { type: 'existing-path', path: temporalCli() }, searchAttributes: [KilnAccount, KilnModel, KilnStatus] },
  });
  const create = (taskQueue: string, activities: object, workflows = false) =>
    Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      activities,
      ...(workflows ? testWorkflowCode() : {}),
    });
  const all = await Promise.all([
    create(controlQueue, control, true),
    ...Object.entries(queues).map(([queue, activities]) => create(queue, activities)),
  ]);
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  const workers = Promise.all(all.map((w) => w.runUntil(stopped)));
  return {
    env,
    execute: (args) =>
      env.client.workflow.execute('predictionWorkflow', {
        workflowId: predictionWorkflowId(args.id),
        taskQueue: controlQueue,
        args: [args],
      }),
    teardown: async () => {
      stop();
      await workers;
      await env.teardown();
    },
  };
}

export const noop = async (): Promise<undefined> => undefined;

/** A fake engine's result: what the real one returns for a short text, with `over` changed. */
export const predictResult = (over: Partial<PredictResult> = {}): PredictResult => ({
  output: ['ok'],
  logs: [],
  metrics: { predict_time: 0.1 },
  startedAt: new Date().toISOString(),
  aborted: false,
  hardware: 'cpu',
  ...over,
});

/** A text-generation prediction of account-a on `versionId`, as the API starts it. */
export const predictionArgs = (id: string, versionId: string, over: Partial<PredictionArgs> = {}): PredictionArgs => ({
  id,
  accountId: 'account-a',
  model: 'unit/model',
  versionId,
  task: 'text-generation',
  input: { prompt: 'hi' },
  createdAt: new Date().toISOString(),
  webhook: null,
  webhookEventsFilter: null,
  deadline: null,
  priority: { fairnessKey: 'account-a', fairnessWeight: 1, priorityKey: 3 },
  ...over,
});
