/**
 * Task types own the schema of their input and output; the API validates with it before a
 * prediction starts and the engine parses with it again before it runs.
 */
import { z } from 'zod';
import type { EngineName } from '../statuses';
import { embeddingsInput, embeddingsOutput } from './embeddings';
import { removeBackgroundInput, removeBackgroundOutput } from './remove-background';
import { textGenerationInput, textGenerationOutput } from './text-generation';

export interface TaskType {
  input: z.ZodType;
  output: z.ZodType;
  /** The engines that serve it, the default first. */
  engines: readonly EngineName[];
  /** The default per account, as Workers AI sets one per task type. */
  rateLimitPerMinute: number;
  /** Its output is a file the engine stores, one per attempt (named by prediction and attempt). */
  outputFiles?: boolean;
}

/** The product's task types. */
const productTasks: Record<string, TaskType> = {
  'text-generation': { input: textGenerationInput, output: textGenerationOutput, engines: ['llama.cpp'], rateLimitPerMinute: 300 },
  embeddings: { input: embeddingsInput, output: embeddingsOutput, engines: ['llama.cpp'], rateLimitPerMinute: 3000 },
  'remove-background': {
    input: removeBackgroundInput,
    output: removeBackgroundOutput,
    engines: ['onnxruntime'],
    rateLimitPerMinute: 720,
    outputFiles: true,
  },
};

/** Task types a process serves beside the product's: the test fixtures, where they are enabled (fixtures/). */
const addedTasks = new Map<string, TaskType>();

export function addTaskType(name: string, type: TaskType): void {
  if (name in productTasks) throw new Error(`task type ${name} is one of the product's`);
  addedTasks.set(name, type);
}

export const DEFAULT_RATE_LIMIT_PER_MINUTE = 720;

export function taskType(name: string): TaskType | undefined {
  return Object.hasOwn(productTasks, name) ? productTasks[name] : addedTasks.get(name);
}

export function taskNames(): string[] {
  return [...Object.keys(productTasks), ...addedTasks.keys()];
}

export function rateLimitFor(task: string, overrides: Record<string, number>): number {
  return overrides[task] ?? taskType(task)?.rateLimitPerMinute ?? DEFAULT_RATE_LIMIT_PER_MINUTE;
}

export function taskInputSchema(task: string): z.ZodType {
  const type = taskType(task);
  if (!type) throw new Error(`unknown task type ${task}`);
  return type.input;
}
