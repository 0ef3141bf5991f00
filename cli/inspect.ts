/**
 * `kiln inspect <id>`: a prediction as the API shows it, next to its workflow as Temporal holds it
 * (run, status, history length, pending activities) and the link into the Temporal UI. Temporal is
 * the operator's side: where it cannot be reached from here, the API's side is still shown.
 */
import { Client, Connection } from '@temporalio/client';
import { z } from 'zod';
import { predictionWorkflowId } from '../domain/contracts';
import { configSchema } from '../lib/config';
import { DEFAULT_TEMPORAL_UI_URL, temporalUiUrl } from '../lib/temporal-ui';
import { type ApiContext, request } from './client';

const temporalSettings = configSchema.pick({ TEMPORAL_ADDRESS: true, TEMPORAL_NAMESPACE: true, KILN_TEMPORAL_UI_URL: true });

export interface WorkflowView {
  workflow_id: string;
  run_id: string;
  status: string;
  task_queue: string;
  started_at: string;
  closed_at: string | null;
  history_length: number;
  search_attributes: Record<string, unknown>;
  pending_activities: Array<{ activity: string; attempt: number; state: string; last_failure: string | null }>;
}

export interface Inspection {
  prediction: { id: string; status: string; model: string; workflow_id: string; urls: { temporal_ui?: string } } & Record<string, unknown>;
  /** What Temporal says, or why it could not be asked. */
  workflow: WorkflowView | { error: string };
  temporal_ui: string;
}

async function describeWorkflow(settings: z.infer<typeof temporalSettings>, workflowId: string): Promise<WorkflowView | { error: string }> {
  let connection: Connection;
  try {
    connection = await Connection.connect({ address: settings.TEMPORAL_ADDRESS, connectTimeout: 3000 });
  } catch (err) {
    return {
      error: `Temporal at ${settings.TEMPORAL_ADDRESS} is not reachable from here (${(err as Error).message}); set TEMPORAL_ADDRESS`,
    };
  }
  try {
    const d = await new Client({ connection, namespace: settings.TEMPORAL_NAMESPACE }).workflow.getHandle(workflowId).describe();
    return {
      workflow_id: d.workflowId,
      run_id: d.runId,
      status: d.status.name,
      task_queue: d.taskQueue,
      started_at: d.startTime.toISOString(),
      closed_at: d.closeTime?.toISOString() ?? null,
      history_length: d.historyLength,
      search_attributes: Object.fromEntries(d.typedSearchAttributes.getAll().map((p) => [p.key.name, p.value])),
      pending_activities: (d.raw.pendingActivities ?? []).map((a) => ({
        activity: a.activityType?.name ?? '?',
        attempt: a.attempt ?? 1,
        state: String(a.state ?? ''),
        last_failure: a.lastFailure?.message ?? null,
      })),
    };
  } catch (err) {
    return { error: `Temporal (namespace ${settings.TEMPORAL_NAMESPACE}) does not know ${workflowId}: ${(err as Error).message}` };
  } finally {
    await connection.close();
  }
}

export async function inspectPrediction(ctx: ApiContext, id: string, env: NodeJS.ProcessEnv = process.env): Promise<Inspection> {
  const prediction = await request<Inspection['prediction']>(ctx, `/v1/predictions/${encodeURIComponent(id)}`);
  // A server older than workflow_id in the JSON names it the same way.
  prediction.workflow_id ??= predictionWorkflowId(prediction.id);
  const settings = temporalSettings.parse(env);
  const workflow = await describeWorkflow(settings, prediction.workflow_id);
  const temporal_ui =
    prediction.urls.temporal_ui ??
    temporalUiUrl(
      { url: settings.KILN_TEMPORAL_UI_URL ?? DEFAULT_TEMPORAL_UI_URL, namespace: settings.TEMPORAL_NAMESPACE },
      prediction.workflow_id,
    );
  return { prediction, workflow, temporal_ui };
}

export function printInspection({ prediction: p, workflow: w, temporal_ui }: Inspection): void {
  console.log(`prediction   ${p.id}  ${p.model}  ${p.status} (API)`);
  console.log(`workflow     ${p.workflow_id}`);
  if ('error' in w) console.log(`temporal     ${w.error}`);
  else {
    console.log(`run          ${w.run_id}`);
    console.log(
      `temporal     ${w.status}  task queue ${w.task_queue}  ${w.history_length} events  started ${w.started_at}${w.closed_at ? `  closed ${w.closed_at}` : ''}`,
    );
    console.log(
      `attributes   ${Object.entries(w.search_attributes)
        .map(([k, v]) => `${k}=${String(v)}`)
        .join('  ')}`,
    );
    for (const a of w.pending_activities) {
      console.log(`pending      ${a.activity} attempt ${a.attempt} ${a.state}${a.last_failure ? `: ${a.last_failure}` : ''}`);
    }
  }
  console.log(`temporal ui  ${temporal_ui}`);
}
