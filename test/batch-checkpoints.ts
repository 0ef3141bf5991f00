/** What a batch's running chunks have checkpointed, read from Temporal as the UI shows it. */
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { batchWorkflowId, type ChunkProgress } from '../domain/batch-contracts';

/** The heartbeat details of the batch workflow's pending chunk activities; none between two runs of a batch that continues as new. */
export async function runningChunks(client: Client, batchId: string): Promise<ChunkProgress[]> {
  try {
    const d = await client.workflow.getHandle(batchWorkflowId(batchId)).describe();
    return (d.raw.pendingActivities ?? [])
      .map((a) => a.heartbeatDetails?.payloads?.[0])
      .filter((p) => p !== undefined && p !== null)
      .map((p) => defaultPayloadConverter.fromPayload<ChunkProgress>(p!));
  } catch {
    return [];
  }
}
