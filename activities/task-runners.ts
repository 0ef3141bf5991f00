/** Which runner serves each task, and the checks every input passes before it runs. */
import type { Context } from '@temporalio/activity';
import type { PredictRequest, PredictResult } from '../domain/contracts';
import { kilnFailure } from '../domain/failures';
import { taskType } from '../domain/tasks';
import type { EngineDeps } from './engine-deps';
import { runEchoFixture } from './run-echo-fixture';
import { runEmbeddings } from './run-embeddings';
import { runRemoveBackground } from './run-remove-background';
import { runTextGeneration } from './run-text-generation';
import type { RunMode, TaskRunner } from './task-run';

// Each runner takes its own task's parsed input; the table is keyed by that task.
// biome-ignore lint/suspicious/noExplicitAny: each runner's input type is its own task's
const RUNNERS: Record<string, TaskRunner<any>> = {
  'text-generation': runTextGeneration,
  embeddings: runEmbeddings,
  'remove-background': runRemoveBackground,
  'echo-fixture': runEchoFixture,
};

/** Runs one input of a known task, its input checked against the task's schema first. */
export async function runTask(
  deps: EngineDeps,
  req: PredictRequest,
  ctx: Context,
  startedAt: string,
  queueSeconds: number,
  mode: RunMode,
): Promise<PredictResult> {
  const task = taskType(req.task);
  if (!task) throw kilnFailure('InvalidInput', `task ${req.task} is not served here`);
  const parsed = task.input.safeParse(req.input);
  if (!parsed.success) throw kilnFailure('InvalidInput', parsed.error.message);
  const runner = RUNNERS[req.task];
  if (!runner) throw kilnFailure('InvalidInput', `task ${req.task} has no engine on this node`);
  return runner({ req, input: parsed.data, ctx, startedAt, queueSeconds, mode, deps });
}
