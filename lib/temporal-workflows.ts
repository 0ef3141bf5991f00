import { type Client, WorkflowNotFoundError } from '@temporalio/client';

/** Whether Temporal has any run of the workflow (none: never started, or past the namespace's retention). */
export async function workflowExists(temporal: Client, workflowId: string): Promise<boolean> {
  try {
    await temporal.workflow.getHandle(workflowId).describe();
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}
