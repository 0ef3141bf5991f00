/** One input being run on this node: what every task's runner is given. */
import type { Context } from '@temporalio/activity';
import type { PredictRequest, PredictResult } from '../domain/contracts';
import type { EngineDeps } from './engine-deps';

/** How one input runs: as a prediction of its own (`live`), or as an item of a batch. */
export interface RunMode {
  live: boolean;
  heartbeat: (details: unknown) => void;
}

export interface TaskRun<Input> {
  req: PredictRequest;
  /** The task's input, parsed by its schema. */
  input: Input;
  ctx: Context;
  startedAt: string;
  /** Time in the model's fair queue, for the metrics. */
  queueSeconds: number;
  mode: RunMode;
  deps: EngineDeps;
}

/** Runs one task's input on its engine. */
export type TaskRunner<Input = unknown> = (run: TaskRun<Input>) => Promise<PredictResult>;
