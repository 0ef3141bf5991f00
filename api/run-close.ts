/**
 * A retry starts a new run of a workflow whose projection says it ended. The projection shows
 * the end before the run closes (its last write is an activity of the run), so a retry sent at
 * once may find the run still open: it waits a little for the close.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { type Client, WorkflowNotFoundError } from '@temporalio/client';

/** How long a retry waits for the old run to close after the projection said it ended. */
const CLOSE_WAIT_MS = 10_000;

export async function closeOf(temporal: Client, workflowId: string): Promise<void> {
  const handle = temporal.workflow.getHandle(workflowId);
  try {
    if ((await handle.describe()).status.name !== 'RUNNING') return;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return;
    throw err;
  }
  // One signal ends both: the timer, and the result's long poll, which would otherwise hold a
  // gRPC call open for up to a minute after the race is decided.
  const waited = new AbortController();
  await Promise.race([
    temporal.withAbortSignal(waited.signal, () => handle.result()).catch(() => undefined),
    sleep(CLOSE_WAIT_MS, undefined, { signal: waited.signal }).catch(() => undefined),
  ]);
  waited.abort();
}
