/**
 * The prediction workflow's prefill/decode split alone, with fake activities: a long prompt's
 * prefill runs on the prefill node's queue and its result goes to the decode node's predict; a
 * failed prefill leaves the decode node to prefill; a prompt the API did not mark long never asks
 * for a split. On the Temporal CLI's dev server (see test/workflow-env.ts for why).
 */
import { ApplicationFailure } from '@temporalio/common';
import {
  modelQueue,
  type PredictionArgs,
  type PredictRequest,
  type PredictResult,
  type PrefillRequest,
  type PrefillResult,
  prefillQueue,
  sessionQueue,
} from '../../domain/contracts';
import type { PredictionSnapshot } from '../../domain/prediction-snapshot';
import { noop, predictionArgs, predictResult, startWorkflowEnv, type WorkflowTestEnv } from '../workflow-env';

jest.setTimeout(180_000);

const CONTROL_QUEUE = 'unit-split-control';
const VERSION = 'unit-split-version';

/** What each queue's fake engine was asked, by prediction id. */
const predicted = new Map<string, { queue: string; req: PredictRequest }>();
const prefills = new Map<string, PrefillRequest>();
const splitsAsked: string[] = [];
/** Prediction ids whose prefill fails (its node lost, say). */
const failingPrefill = new Set<string>();

let workflows: WorkflowTestEnv;

const prefilled = (nodeId: string): PrefillResult => ({
  nodeId,
  snapshot: 'snapshot-1',
  tokens: 2000,
  bytes: 4096,
  prefillSeconds: 0.5,
  uploadSeconds: 0.1,
});

const predictOn = (queue: string) => ({
  predict: async (req: PredictRequest): Promise<PredictResult> => {
    predicted.set(req.predictionId, { queue, req });
    return predictResult();
  },
});

beforeAll(async () => {
  const control = {
    beginPrediction: async () => ({ placement: { nodeId: 'node-both', warm: true } }),
    projectPrediction: noop,
    finishPrediction: noop,
    beginAttempt: async () => ({ continues: '' }),
    placeModel: async () => ({ nodeId: 'node-both', warm: true }),
    placeSplit: async ({ versionId }: { versionId: string }) => {
      splitsAsked.push(versionId);
      return { prefill: { nodeId: 'node-p', warm: true }, decode: { nodeId: 'node-d', warm: true } };
    },
  };
  const prefill = {
    prefill: async (req: PrefillRequest): Promise<PrefillResult> => {
      prefills.set(req.predictionId, req);
      if (failingPrefill.has(req.predictionId)) throw ApplicationFailure.nonRetryable('the node went away', 'EngineInterrupted');
      return prefilled('node-p');
    },
  };
  workflows = await startWorkflowEnv(CONTROL_QUEUE, control, {
    [prefillQueue('node-p')]: prefill,
    [sessionQueue('node-d')]: predictOn(sessionQueue('node-d')),
    [modelQueue(VERSION)]: predictOn(modelQueue(VERSION)),
  });
});

afterAll(async () => {
  await workflows?.teardown();
});

let n = 0;
function run(over: Partial<PredictionArgs>, opts: { failPrefill?: boolean } = {}): Promise<PredictionSnapshot & { id: string }> {
  const id = `unit-split-${Date.now()}-${n++}`;
  if (opts.failPrefill) failingPrefill.add(id);
  return workflows.execute(predictionArgs(id, VERSION, { input: { prompt: 'x'.repeat(8000) }, ...over }));
}

test('a long prompt is prefilled on the prefill node, then decoded on the decode node with what the prefill left', async () => {
  const final = await run({ longPrompt: { tokens: 2000 } });
  expect(final.status).toBe('succeeded');
  expect(prefills.get(final.id)).toMatchObject({ versionId: VERSION, owner: 'account-a', input: { prompt: 'x'.repeat(8000) } });
  expect(predicted.get(final.id)?.queue).toBe(sessionQueue('node-d'));
  expect(predicted.get(final.id)?.req.prefilled).toEqual(prefilled('node-p'));
  expect(final.logs).toMatch(/Prefilled 2000 prompt tokens on node node-p in 0\.500 s; KV snapshot of 4096 bytes/);
});

test('a prefill that fails leaves the decode node to prefill the prompt', async () => {
  const final = await run({ longPrompt: { tokens: 2000 } }, { failPrefill: true });
  expect(final.status).toBe('succeeded');
  expect(predicted.get(final.id)?.queue).toBe(sessionQueue('node-d'));
  expect(predicted.get(final.id)?.req.prefilled).toMatchObject({ nodeId: 'node-p', snapshot: null, bytes: 0 });
  expect(final.logs).toMatch(
    /Prefill on node node-p failed \(EngineInterrupted: the node went away\): node node-d prefills the prompt itself/,
  );
});

test('a prompt the API did not mark long is never split', async () => {
  const asked = splitsAsked.length;
  const final = await run({ input: { prompt: 'short' } });
  expect(final.status).toBe('succeeded');
  expect(splitsAsked.length).toBe(asked);
  expect(prefills.has(final.id)).toBe(false);
  expect(predicted.get(final.id)?.queue).toBe(modelQueue(VERSION));
  expect(predicted.get(final.id)?.req.prefilled).toBeUndefined();
});
