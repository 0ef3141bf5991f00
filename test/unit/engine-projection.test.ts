/** The rows an engine writes on the hot path, and the workflow's own final state, come from one pure function. */
import type { PredictResult } from '../../domain/contracts';
import { ENGINE_REVISIONS, processingSnapshot, succeededSnapshot } from '../../domain/engine-projection';
import type { PredictionSnapshot } from '../../domain/prediction-snapshot';

const sent: PredictionSnapshot = {
  id: 'p1',
  accountId: 'a1',
  model: 'kiln/echo-fixture',
  versionId: 'v1',
  input: { text: 'hi' },
  output: null,
  logs: 'Attempt 1 failed on node n1: boom; placing the model again\n',
  error: null,
  status: 'processing',
  metrics: { setup_time: 0.5 },
  createdAt: '2026-01-01T00:00:00.000Z',
  startedAt: null,
  completedAt: null,
  revision: 3,
};
const result: PredictResult = {
  output: 'hi',
  logs: ['echo fixture: slept 0 ms on node n2'],
  metrics: { predict_time: 0.001, queue_time: 0.02 },
  startedAt: '2026-01-01T00:00:00.100Z',
  aborted: false,
  hardware: 'fixture',
};

test('processing is the next revision, started when the engine started', () => {
  expect(processingSnapshot(sent, result.startedAt)).toMatchObject({
    status: 'processing',
    startedAt: result.startedAt,
    revision: 4,
    logs: sent.logs,
  });
});

test('the final row keeps what the workflow knew and adds the result, two revisions on', () => {
  const final = succeededSnapshot(sent, result, '2026-01-01T00:00:01.250Z');
  expect(final).toEqual({
    ...sent,
    status: 'succeeded',
    output: 'hi',
    startedAt: result.startedAt,
    logs: `${sent.logs}echo fixture: slept 0 ms on node n2\n`,
    metrics: { setup_time: 0.5, predict_time: 0.001, queue_time: 0.02, total_time: 1.25 },
    completedAt: '2026-01-01T00:00:01.250Z',
    revision: sent.revision + ENGINE_REVISIONS,
  });
  // A start the workflow already knew (an earlier signal) is kept.
  expect(succeededSnapshot({ ...sent, startedAt: '2026-01-01T00:00:00.050Z' }, result, '2026-01-01T00:00:01.250Z').startedAt).toBe(
    '2026-01-01T00:00:00.050Z',
  );
});
