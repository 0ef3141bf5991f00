/**
 * Task types own the schema of their input and output; the API validates with it before a
 * prediction starts and the engine parses with it again before it runs.
 */
import { z } from 'zod';
import { echoFixtureInput, echoFixtureOutput } from '../workers/engines/echo-fixture';
import { embeddingsInput, embeddingsOutput } from './embeddings';
import { removeBackgroundInput, removeBackgroundOutput } from './remove-background';
import { textGenerationInput, textGenerationOutput } from './text-generation';

/** `rateLimitPerMinute`: the default per account, as Workers AI sets one per task type. */
export const tasks = {
  'text-generation': { input: textGenerationInput, output: textGenerationOutput, engines: ['llama.cpp'], rateLimitPerMinute: 300 },
  embeddings: { input: embeddingsInput, output: embeddingsOutput, engines: ['llama.cpp'], rateLimitPerMinute: 3000 },
  // outputFiles: its output is a file the engine stores, one per attempt (named by prediction and attempt).
  'remove-background': { input: removeBackgroundInput, output: removeBackgroundOutput, engines: ['onnxruntime'], rateLimitPerMinute: 720, outputFiles: true },
  // A test fixture (no inference) for benchmarks of the orchestration: see workers/engines/echo-fixture.ts.
  'echo-fixture': { input: echoFixtureInput, output: echoFixtureOutput, engines: ['echo-fixture'], rateLimitPerMinute: 60_000 },
} as const;

export const DEFAULT_RATE_LIMIT_PER_MINUTE = 720;

export function rateLimitFor(task: string, overrides: Record<string, number>): number {
  return overrides[task] ?? (isTaskName(task) ? tasks[task].rateLimitPerMinute : DEFAULT_RATE_LIMIT_PER_MINUTE);
}

export type TaskName = keyof typeof tasks;
export const taskNames = Object.keys(tasks) as TaskName[];

export function isTaskName(name: string): name is TaskName {
  return name in tasks;
}

export function taskInputSchema(task: string): z.ZodType {
  if (!isTaskName(task)) throw new Error(`unknown task type ${task}`);
  return tasks[task].input;
}
