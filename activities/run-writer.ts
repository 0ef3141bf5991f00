/**
 * The workflow run an activity writes for, as projections need it (db/predictions.ts RunWriter):
 * a run started by an operator's reset (or a continue-as-new) wins over the run before it, and an
 * old run's late write loses, whatever their revisions say. Which run is current is Temporal's
 * answer, asked only when the row was last written by another run.
 */
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { RunWriter } from '../db/predictions';

/** Whether `runId` is the latest run of `workflowId` (with no client to ask: yes). */
export async function isLatestRun(client: Client | undefined, workflowId: string, runId: string): Promise<boolean> {
  if (!client) return true;
  return (await client.workflow.getHandle(workflowId).describe()).runId === runId;
}

export function runWriterOf(client: Client | undefined, workflowId: string, runId: string): RunWriter {
  return { runId, isCurrent: () => isLatestRun(client, workflowId, runId) };
}

/** The run of the workflow that called the running activity (local or not); none outside an activity. */
export function currentRunWriter(client: Client | undefined): RunWriter | undefined {
  let execution;
  try {
    execution = Context.current().info.workflowExecution;
  } catch {
    return undefined;
  }
  if (!execution) return undefined;
  return runWriterOf(client, execution.workflowId, execution.runId);
}
