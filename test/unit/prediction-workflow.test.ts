/**
 * The prediction workflow alone, with fake activities (test/workflow-env.ts): deadlines (canceled
 * once started, aborted before) and the delays between attempts, in real time, with deadlines and
 * delays of a second or two.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import {
  modelQueue,
  type PredictionArgs,
  type PredictRequest,
  type PredictResult,
  predictionWorkflowId,
  type RetryPolicy,
  sessionQueue,
} from '../../domain/contracts';
import type { PredictionSnapshot } from '../../domain/prediction-snapshot';
import { noop, predictionArgs, predictResult, startWorkflowEnv, type WorkflowTestEnv } from '../workflow-env';

jest.setTimeout(180_000);

const CONTROL_QUEUE = 'unit-control';
const VERSION = 'unit-version';

/** What one test's fake engine does with each attempt, by prediction id. */
type Attempt = (req: PredictRequest, n: number) => Promise<PredictResult>;
const engines = new Map<string, Attempt>();
const attemptsAt = new Map<string, number[]>();
const placed: Array<{ versionId: string; excludeNodes?: string[] }> = [];

let workflows: WorkflowTestEnv;

/** The engine's start signal, as the real engine sends it when the prediction leaves the queue. */
async function signalStarted(predictionId: string): Promise<void> {
  await workflows.env.client.workflow
    .getHandle(predictionWorkflowId(predictionId))
    .signal('predictionStarted', { startedAt: new Date().toISOString(), nodeId: 'node-a' });
}

/** Heartbeats until canceled (a deadline), then does what `onCancel` says. */
async function runUntilCanceled<T>(onCancel: () => T): Promise<T> {
  const ctx = Context.current();
  for (;;) {
    ctx.heartbeat();
    try {
      await ctx.sleep(200);
    } catch (err) {
      if (err instanceof CancelledFailure) return onCancel();
      throw err;
    }
  }
}

beforeAll(async () => {
  const control = {
    beginPrediction: async () => ({ placement: { nodeId: 'node-a', warm: true } }),
    projectPrediction: noop,
    finishPrediction: noop,
    // A retry asks what the failed attempts streamed: nothing, here.
    beginAttempt: async () => ({ continues: '' }),
    admitPrediction: noop,
    releaseAdmission: noop,
    recordUsage: noop,
    placeModel: async (req: { versionId: string; excludeNodes?: string[] }) => {
      placed.push(req);
      return { nodeId: 'node-a', warm: true };
    },
  };
  const engine = {
    predict: async (req: PredictRequest): Promise<PredictResult> => {
      const times = attemptsAt.get(req.predictionId) ?? [];
      times.push(Date.now());
      attemptsAt.set(req.predictionId, times);
      return engines.get(req.predictionId)!(req, times.length);
    },
  };
  // The node's own queue, as an engine node polls it: a retry goes there (placed on node-a).
  workflows = await startWorkflowEnv(CONTROL_QUEUE, control, { [modelQueue(VERSION)]: engine, [sessionQueue('node-a')]: engine });
});

afterAll(async () => {
  await workflows?.teardown();
});

let n = 0;
function run(
  attempt: Attempt,
  opts: { deadlineMs?: number; retry?: RetryPolicy; args?: Partial<PredictionArgs> } = {},
): Promise<PredictionSnapshot> {
  const id = `unit-${Date.now()}-${n++}`;
  engines.set(id, attempt);
  const now = Date.now();
  return workflows.execute(
    predictionArgs(id, VERSION, {
      createdAt: new Date(now).toISOString(),
      deadline: opts.deadlineMs ? new Date(now + opts.deadlineMs).toISOString() : null,
      retry: opts.retry,
      ...opts.args,
    }),
  );
}

test('a deadline that passes while the prediction runs cancels it: canceled, with the output it had', async () => {
  const started = Date.now();
  const final = await run(
    async (req) => {
      await signalStarted(req.predictionId);
      return runUntilCanceled(() => predictResult({ output: ['partial'], aborted: true }));
    },
    { deadlineMs: 2_000 },
  );
  expect(final.status).toBe('canceled');
  expect(final.output).toEqual(['partial']);
  expect(final.startedAt).not.toBeNull();
  expect(final.logs).toMatch(/Canceled: the deadline .* passed/);
  // Not before the deadline.
  expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
});

test('a deadline that passes before the prediction starts aborts it: aborted, never started', async () => {
  // The engine took the task but never signaled a start: canceled there, it reports the cancellation.
  const final = await run(
    () =>
      runUntilCanceled((): PredictResult => {
        throw new CancelledFailure('canceled');
      }),
    { deadlineMs: 1_500 },
  );
  expect(final.status).toBe('aborted');
  expect(final.startedAt).toBeNull();
  expect(final.logs).toMatch(/Aborted: the deadline .* passed before the prediction started/);
});

test('failed attempts are placed again after the version’s delays (1 s, then 2 s), avoiding the node that failed', async () => {
  placed.length = 0;
  const final = await run(
    async (req, attempt) => {
      if (attempt < 3) throw ApplicationFailure.create({ type: 'EngineFault', message: `attempt ${attempt} broke` });
      await signalStarted(req.predictionId);
      return predictResult();
    },
    { retry: { max_attempts: 3, initial_interval_s: 1, backoff: 2 } },
  );
  expect(final.status).toBe('succeeded');
  expect(final.output).toEqual(['ok']);
  expect(final.logs).toContain('Attempt 1 failed on node node-a: EngineFault: attempt 1 broke; placing the model again in 1 s');
  expect(final.logs).toContain('Attempt 2 failed on node node-a: EngineFault: attempt 2 broke; placing the model again in 2 s');
  const [a1, a2, a3] = attemptsAt.get(final.id)!;
  expect(a2 - a1).toBeGreaterThanOrEqual(1_000);
  expect(a3 - a2).toBeGreaterThanOrEqual(2_000);
  // The second and third placements avoid the node that failed.
  expect(placed).toHaveLength(2);
  expect(placed.every((p) => p.excludeNodes?.includes('node-a'))).toBe(true);
});

test('an attempt whose engine was lost is placed again at once, not after the retry delay', async () => {
  placed.length = 0;
  const final = await run(
    async (req, attempt) => {
      if (attempt === 1) throw ApplicationFailure.create({ type: 'EngineInterrupted', message: 'the engine process stopped' });
      await signalStarted(req.predictionId);
      return predictResult();
    },
    { retry: { max_attempts: 3, initial_interval_s: 5, backoff: 2 } },
  );
  expect(final.status).toBe('succeeded');
  expect(final.logs).toContain(
    'Attempt 1 failed on node node-a: EngineInterrupted: the engine process stopped; placing the model again at once (the engine was lost)',
  );
  const [a1, a2] = attemptsAt.get(final.id)!;
  expect(a2 - a1).toBeLessThan(5_000);
  expect(placed.every((p) => p.excludeNodes?.includes('node-a'))).toBe(true);
});

test('when the attempts run out the prediction fails with the last attempt’s error, and a non-retryable failure is not tried again', async () => {
  const spent = await run(
    async () => {
      throw ApplicationFailure.create({ type: 'EngineInterrupted', message: 'gone again' });
    },
    { retry: { max_attempts: 2, initial_interval_s: 1, backoff: 1 } },
  );
  expect(spent.status).toBe('failed');
  expect(spent.error).toBe('Attempt 2 failed on node node-a: EngineInterrupted: gone again');
  expect(attemptsAt.get(spent.id)).toHaveLength(2);

  const refused = await run(async () => {
    throw ApplicationFailure.create({ type: 'ModelError', message: 'no such thing', nonRetryable: true });
  });
  expect(refused.status).toBe('failed');
  expect(refused.error).toBe('Attempt 1 failed on node node-a: ModelError: no such thing');
  expect(attemptsAt.get(refused.id)).toHaveLength(1);
});

test('a prediction that opens a session runs from the model’s queue and tells the engine the session, on the hot path and off it', async () => {
  const seen: Array<{ queue: string; session?: string; opensSession?: string }> = [];
  const engine: Attempt = async (req) => {
    seen.push({ queue: Context.current().info.taskQueue, session: req.session, opensSession: req.opensSession });
    if (!req.project) await signalStarted(req.predictionId);
    return predictResult();
  };
  await run(engine, { args: { opensSession: 'chain_a' } });
  await run(engine, { args: { opensSession: 'chain_b', admitted: true, placement: { nodeId: 'node-a', warm: true } } });
  expect(seen).toEqual([
    { queue: modelQueue(VERSION), session: undefined, opensSession: 'chain_a' },
    { queue: modelQueue(VERSION), session: undefined, opensSession: 'chain_b' },
  ]);
});
