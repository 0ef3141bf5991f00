/**
 * Task types own the schema of their input and output; the API validates with it before a
 * prediction starts and the engine parses with it again before it runs.
 */
import { z } from 'zod';
import { embeddingsInput, embeddingsOutput } from './embeddings';
import { textGenerationInput, textGenerationOutput } from './text-generation';

export const tasks = {
  'text-generation': { input: textGenerationInput, output: textGenerationOutput, engines: ['llama.cpp'] },
  embeddings: { input: embeddingsInput, output: embeddingsOutput, engines: ['llama.cpp'] },
} as const;

export type TaskName = keyof typeof tasks;
export const taskNames = Object.keys(tasks) as TaskName[];

export function isTaskName(name: string): name is TaskName {
  return name in tasks;
}

export function taskInputSchema(task: string): z.ZodType {
  if (!isTaskName(task)) throw new Error(`unknown task type ${task}`);
  return tasks[task].input;
}
