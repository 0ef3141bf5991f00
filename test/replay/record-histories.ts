/**
 * Records the histories that `workflow-replay.test.ts` replays: one closed run of each workflow
 * type and path, picked from a namespace the suite has just run in. Run it after `npm test` (the
 * suite's namespace keeps its runs) when a workflow gains a path worth guarding (add it to WANTED
 * under a new file name; files already recorded are never replaced):
 *   node --import tsx test/replay/record-histories.ts [namespace]
 * Recorded histories are never edited by hand: they are what older workers wrote.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { isPayloadRef } from '../../lib/payload-refs';

type History = temporal.api.history.v1.IHistory;

const activities = (h: History) =>
  (h.events ?? []).flatMap((e) =>
    e.activityTaskScheduledEventAttributes ? [e.activityTaskScheduledEventAttributes.activityType?.name ?? ''] : [],
  );
const count = (h: History, name: string) => activities(h).filter((a) => a === name).length;
/** Whether the run took the path of patch `id` (its marker records the id in its data). */
const patchedWith = (h: History, id: string) =>
  (h.events ?? []).some(
    (e) =>
      e.markerRecordedEventAttributes?.markerName === 'core_patch' &&
      Object.values(e.markerRecordedEventAttributes.details ?? {}).some((p) =>
        (p.payloads ?? []).some((x) =>
          Buffer.from(x.data ?? [])
            .toString()
            .includes(id),
        ),
      ),
  );

/** Whether any payload in the history is stored by reference (lib/payload-refs.ts). */
function holdsPayloadRefs(node: unknown): boolean {
  if (!node || typeof node !== 'object' || node instanceof Uint8Array) return false;
  const o = node as Record<string, unknown>;
  if (o.data instanceof Uint8Array && 'metadata' in o && isPayloadRef(o)) return true;
  return Object.values(o).some(holdsPayloadRefs);
}
/** Markers by name: `core_local_activity` for each local activity. */
const markers = (h: History, name: string) => (h.events ?? []).filter((e) => e.markerRecordedEventAttributes?.markerName === name).length;
/** A prediction on the hot path (patched 'lean-hot-path'). */
const lean = (h: History) => patchedWith(h, 'lean-hot-path');

/** Each file: a visibility query and what its history must show. */
const WANTED: Array<{ file: string; query: string; shows: (h: History) => boolean }> = [
  {
    file: 'prediction-warm',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='succeeded' AND KilnModel='kiln/tiny-llama'",
    shows: (h) => count(h, 'loadModel') === 0 && count(h, 'predict') === 1,
  },
  {
    file: 'prediction-cold',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='succeeded'",
    shows: (h) => count(h, 'loadModel') === 1,
  },
  {
    file: 'prediction-retried',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='succeeded'",
    shows: (h) => count(h, 'predict') >= 2,
  },
  {
    file: 'prediction-retried-continued',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='succeeded'",
    shows: (h) => count(h, 'predict') >= 2 && patchedWith(h, 'continue-attempts'),
  },
  { file: 'prediction-failed', query: "WorkflowType='predictionWorkflow' AND KilnStatus='failed'", shows: () => true },
  {
    file: 'prediction-canceled',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='canceled'",
    shows: (h) => count(h, 'predict') >= 1,
  },
  { file: 'prediction-deadline', query: "WorkflowType='predictionWorkflow' AND KilnStatus='aborted'", shows: () => true },
  {
    file: 'prediction-lean-warm',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='succeeded'",
    shows: (h) => lean(h) && markers(h, 'core_local_activity') === 0 && count(h, 'predict') === 1,
  },
  {
    file: 'prediction-lean-cold',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='succeeded'",
    shows: (h) => lean(h) && count(h, 'loadModel') === 1,
  },
  {
    file: 'prediction-lean-retried',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='succeeded'",
    shows: (h) => lean(h) && count(h, 'predict') >= 2,
  },
  { file: 'prediction-lean-failed', query: "WorkflowType='predictionWorkflow' AND KilnStatus='failed'", shows: lean },
  {
    file: 'prediction-lean-canceled',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='canceled'",
    shows: (h) => lean(h) && count(h, 'predict') >= 1,
  },
  { file: 'prediction-lean-deadline', query: "WorkflowType='predictionWorkflow' AND KilnStatus='aborted'", shows: lean },
  // The hot path with every earlier patch behind one marker (EARLIER_PATCHES_IN_ONE in workflows/prediction.ts).
  {
    file: 'prediction-lean-one-marker',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='succeeded'",
    shows: (h) => patchedWith(h, 'earlier-patches-in-one') && markers(h, 'core_patch') === 1 && markers(h, 'core_local_activity') === 0,
  },
  // The queued path (local activities, the start signal) behind the same one marker.
  {
    file: 'prediction-queued-one-marker',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='succeeded'",
    shows: (h) => patchedWith(h, 'earlier-patches-in-one') && markers(h, 'core_patch') === 1 && markers(h, 'core_local_activity') > 0,
  },
  { file: 'batch-continued-as-new', query: "WorkflowType='batchWorkflow' AND ExecutionStatus='ContinuedAsNew'", shows: () => true },
  { file: 'batch-completed', query: "WorkflowType='batchWorkflow' AND ExecutionStatus='Completed'", shows: () => true },
  // POST /v1/batches/{id}/retry: a run that plans and reruns only the failed chunks (test/e2e/batch-retry.test.ts).
  {
    file: 'batch-rerun',
    query: "WorkflowType='batchWorkflow' AND ExecutionStatus='Completed'",
    shows: (h) => patchedWith(h, 'batch-rerun'),
  },
  // x-session-affinity: placed through the session's node queue (test/e2e/prefix-cache.test.ts).
  {
    file: 'prediction-session',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='succeeded'",
    shows: (h) => patchedWith(h, 'session-affinity'),
  },
  // A Responses chain's first turn: from the model's queue, its node recorded as the session's (test/e2e/openai-responses.test.ts, bench responses).
  {
    file: 'prediction-opens-session',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='succeeded'",
    shows: (h) => patchedWith(h, 'opens-session'),
  },
  // A long prompt prefilled on a prefill node, decoded on a decode node (test/e2e/prefill-split.test.ts).
  {
    file: 'prediction-prefill-split',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='succeeded'",
    shows: (h) => patchedWith(h, 'prefill-split') && count(h, 'prefill') === 1 && count(h, 'predict') === 1,
  },
  // An engine killed mid-generation: its restart reported the attempt lost, and the retry was placed at once, no timer
  // (bench/kv-continue.ts, test/e2e/supervisor.test.ts).
  {
    file: 'prediction-engine-lost',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='succeeded'",
    shows: (h) => patchedWith(h, 'engine-loss-at-once') && count(h, 'predict') >= 2,
  },
  {
    file: 'webhook-delivered',
    query: "WorkflowType='webhookDeliveryWorkflow' AND ExecutionStatus='Completed'",
    shows: (h) => count(h, 'deliverWebhook') >= 1,
  },
  { file: 'webhook-gave-up', query: "WorkflowType='webhookDeliveryWorkflow' AND ExecutionStatus='Failed'", shows: () => true },
  { file: 'warm-deployment', query: "WorkflowType='warmDeploymentWorkflow' AND ExecutionStatus!='Running'", shows: () => true },
  { file: 'replica-scaler', query: "WorkflowType='replicaScalerWorkflow' AND ExecutionStatus!='Running'", shows: () => true },
  // Its looks in one long activity while nothing loads (workflows/replica-scaler.ts): one still running will do, once its
  // first watch has ended (after about ten minutes on an idle stack).
  {
    file: 'replica-scaler-one-activity',
    query: "WorkflowType='replicaScalerWorkflow'",
    shows: (h) => count(h, 'watchReplicas') >= 2,
  },
  {
    file: 'reconciler',
    query: "WorkflowType='reconcilerWorkflow' AND ExecutionStatus!='Running'",
    shows: (h) => count(h, 'reconcileClosedWorkflows') >= 2,
  },
  // Its looks in one long activity (workflows/reconciler.ts): a run lasts an hour, so one still running will do,
  // once its first activity has ended (after about ten minutes).
  {
    file: 'reconciler-one-activity',
    query: "WorkflowType='reconcilerWorkflow'",
    shows: (h) => count(h, 'reconcileEvery') >= 2,
  },
  // A run an operator's reset started (test/e2e/operator-actions.test.ts): it replays the old run's events up to the reset point.
  {
    file: 'prediction-reset',
    query: "WorkflowType='predictionWorkflow' AND KilnStatus='succeeded'",
    shows: (h) =>
      (h.events ?? []).some(
        (e) =>
          e.workflowTaskFailedEventAttributes?.cause ===
          temporal.api.enums.v1.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW,
      ),
  },
];

async function main() {
  const namespace = process.argv[2] ?? 'kiln-test';
  const address = process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233';
  const connection = await Connection.connect({ address });
  const client = new Client({ connection, namespace });
  try {
    for (const want of WANTED) {
      const file = path.join(__dirname, 'histories', `${want.file}.json`);
      // A recorded history is what an older worker wrote: it stays, so the code must keep replaying it.
      if (existsSync(file)) continue;
      let found = false;
      for await (const wf of client.workflow.list({ query: want.query })) {
        const history = await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
        // The replay test runs without the bucket: a history whose payloads went by reference would not decode there.
        if (!want.shows(history) || holdsPayloadRefs(history)) continue;
        // The CLI writes the protobuf JSON that Worker.runReplayHistories reads (as the Temporal UI downloads it).
        const { stdout } = await promisify(execFile)(
          process.env.TEMPORAL_BIN ?? 'temporal',
          ['workflow', 'show', '--address', address, '--namespace', namespace, '-w', wf.workflowId, '-r', wf.runId, '--output', 'json'],
          { maxBuffer: 64 * 2 ** 20 },
        );
        await writeFile(file, stdout);
        console.log(`${want.file}: ${wf.workflowId} (${history.events?.length} events)`);
        found = true;
        break;
      }
      if (!found) console.warn(`${want.file}: no run in ${namespace} matches`);
    }
  } finally {
    await connection.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
