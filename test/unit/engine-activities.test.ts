/**
 * The engine node's activities with a fake engine behind the engine interfaces (engines/index.ts):
 * the task table, input checks, results and metrics, and engine errors as Temporal failures.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createEngineActivities } from '../../activities/engine';
import type { EngineDeps } from '../../activities/engine-deps';
import type { NodeHooks } from '../../activities/node-hooks';
import { runTask } from '../../activities/task-runners';
import type { Db } from '../../db/client';
import type { PredictRequest, PredictResult } from '../../domain/contracts';
import { EngineError, type TextEngine } from '../../engines';
import type { GenerationResult } from '../../engines/llama/engine';

const node: NodeHooks = {
  nodeId: 'node-a',
  hardware: 'cpu',
  serve: async () => undefined,
  begin: () => () => undefined,
  makeRoom: async () => undefined,
  makeRoomForAdapter: async () => undefined,
  settled: async () => undefined,
};

const generation = (chunks: string[]): GenerationResult => ({
  chunks,
  inputTokens: 5,
  outputTokens: chunks.length,
  continuedTokens: 0,
  cachedTokens: 2,
  cacheTier: 'live',
  aborted: false,
  stopReason: 'eogToken',
  seed: 7,
  timeToFirstToken: 0.01,
  predictSeconds: 0.5,
});

/** A text engine that answers from a script, and records what it was asked. */
function fakeTextEngine(overrides: Partial<TextEngine> = {}): TextEngine & { asked: unknown[] } {
  const asked: unknown[] = [];
  return {
    asked,
    isLoaded: () => true,
    load: async () => undefined,
    loadAdapter: async () => undefined,
    embed: async (_versionId, texts) => {
      asked.push(texts);
      return { vectors: texts.map((t) => [t.length, 1]), tokens: texts.join(' ').split(' ').length };
    },
    generate: async (_versionId, input, opts) => {
      asked.push(input);
      for (const [i, chunk] of ['Paris', '.'].entries()) opts?.onChunk?.(chunk, i + 1);
      return generation(['Paris', '.']);
    },
    ...overrides,
  } as TextEngine & { asked: unknown[] };
}

const deps = (llama: TextEngine): EngineDeps => ({ db: {} as Db, cache: { ensure: jest.fn() }, llama, node, controlQueue: 'control' });

const request = (task: string, input: Record<string, unknown>): PredictRequest => ({
  predictionId: 'p1',
  versionId: 'v1',
  task,
  input,
  snapshot: {
    id: 'p1',
    accountId: 'acct',
    model: 'kiln/m',
    versionId: 'v1',
    input,
    output: null,
    logs: '',
    error: null,
    status: 'starting',
    metrics: {},
    createdAt: new Date(0).toISOString(),
    startedAt: null,
    completedAt: null,
    revision: 1,
  },
});

test('an embeddings prediction returns the engine’s vectors, with token and time metrics', async () => {
  const llama = fakeTextEngine();
  const { predict } = createEngineActivities(deps(llama));
  const result = (await new MockActivityEnvironment().run(predict, request('embeddings', { text: ['a kiln', 'clay'] }))) as PredictResult;
  expect(llama.asked).toEqual([['a kiln', 'clay']]);
  expect(result.output).toEqual([
    [6, 1],
    [4, 1],
  ]);
  expect(result.metrics).toMatchObject({ input_token_count: 3 });
  expect(result.metrics.predict_time).toBeGreaterThanOrEqual(0);
  expect(result).toMatchObject({ aborted: false, hardware: 'cpu' });
});

test('a batch item of text generation returns its chunks and the generation’s figures, without a stream', async () => {
  const llama = fakeTextEngine();
  const heartbeats: unknown[] = [];
  const result: PredictResult = await new MockActivityEnvironment().run(() =>
    runTask(deps(llama), request('text-generation', { prompt: 'The capital of France is' }), Context.current(), 'now', 0.25, {
      live: false,
      heartbeat: (d) => heartbeats.push(d),
    }),
  );
  expect(result.output).toEqual(['Paris', '.']);
  expect(result.metrics).toMatchObject({
    input_token_count: 5,
    cached_tokens: 2,
    cache_tier: 'live',
    output_token_count: 2,
    tokens_per_second: 4,
    queue_time: 0.25,
  });
  expect(result.logs).toEqual(['Using seed: 7', 'Generated 2 tokens in 0.500 s (4.0 tokens/s, stop: eogToken)']);
  expect(heartbeats).toContainEqual({ tokens: 1 });
});

test('an input that fails its task’s schema is InvalidInput, and the engine is never asked', async () => {
  const llama = fakeTextEngine();
  const { predict } = createEngineActivities(deps(llama));
  const err = await new MockActivityEnvironment().run(predict, request('embeddings', { text: 42 })).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApplicationFailure);
  expect(err).toMatchObject({ type: 'InvalidInput', nonRetryable: true });
  expect(llama.asked).toEqual([]);
});

test('a task no runner serves is InvalidInput', async () => {
  const { predict } = createEngineActivities(deps(fakeTextEngine()));
  await expect(new MockActivityEnvironment().run(predict, request('speech-to-text', {}))).rejects.toMatchObject({ type: 'InvalidInput' });
});

test('an engine error reaches Temporal as a failure of its type, retryable as the taxonomy says', async () => {
  const native = new Error('n_ctx exceeded');
  const llama = fakeTextEngine({
    embed: async () => {
      throw new EngineError('ContextLengthExceeded', 'input.text: 9000 tokens, more than the context', { cause: native });
    },
  });
  const { predict } = createEngineActivities(deps(llama));
  const err = (await new MockActivityEnvironment()
    .run(predict, request('embeddings', { text: 'long' }))
    .catch((e: unknown) => e)) as ApplicationFailure;
  expect(err).toBeInstanceOf(ApplicationFailure);
  expect(err).toMatchObject({
    type: 'ContextLengthExceeded',
    nonRetryable: true,
    message: 'input.text: 9000 tokens, more than the context',
  });
  expect((err.cause as EngineError).cause).toBe(native);
});
