/**
 * How far a cold prediction's warm-up has got, read from Temporal: the engine's `loadModel`
 * activity heartbeats its phase and bytes, and the workflow's pending activities carry the
 * latest heartbeat. Nothing is stored for it: the history is the source, as for everything else.
 */
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { predictionWorkflowId } from '../domain/contracts';

export interface SetupProgress {
  /** `queued`: waiting for a node or a slot; `download`, `load`: the model is being warmed up. */
  phase: 'queued' | 'download' | 'load' | null;
  file?: string;
  bytes?: number;
  total?: number;
  attempt?: number;
}

interface HeartbeatDetails {
  phase?: string;
  file?: string;
  bytes?: number;
  total?: number;
}

/** The progress a loadModel heartbeat reports (exported for its unit test). */
export function progressFromHeartbeat(details: unknown, attempt?: number): SetupProgress {
  const d = (details ?? {}) as HeartbeatDetails;
  const phase = d.phase === 'download' || d.phase === 'load' ? d.phase : 'queued';
  return {
    phase,
    ...(typeof d.file === 'string' ? { file: d.file } : {}),
    ...(typeof d.bytes === 'number' ? { bytes: d.bytes } : {}),
    ...(typeof d.total === 'number' ? { total: d.total } : {}),
    ...(attempt ? { attempt } : {}),
  };
}

export async function setupProgress(temporal: Client, predictionId: string): Promise<SetupProgress> {
  let description;
  try {
    description = await temporal.workflow.getHandle(predictionWorkflowId(predictionId)).describe();
  } catch (err) {
    // A starting row whose workflow Temporal no longer knows (past retention): nothing is pending.
    if (err instanceof WorkflowNotFoundError) return { phase: null };
    throw err;
  }
  const load = description.raw.pendingActivities?.find((a) => a.activityType?.name === 'loadModel');
  if (!load) return { phase: 'queued' };
  const payload = load.heartbeatDetails?.payloads?.[0];
  const details = payload ? defaultPayloadConverter.fromPayload(payload) : undefined;
  return progressFromHeartbeat(details, load.attempt ?? undefined);
}
