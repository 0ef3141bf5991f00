/** What a prediction or batch whose workflow closed early becomes. */
import { batchClosedEarly, type ClosedRun, outcomeOf, predictionClosedEarly } from '../../activities/closed-run-outcome';
import type { BatchSnapshot } from '../../domain/batch-contracts';
import { ENGINE_REVISIONS } from '../../domain/engine-projection';
import type { PredictionSnapshot } from '../../domain/prediction-snapshot';

const closeTime = new Date('2026-01-01T00:00:10.000Z');
const run = (status: ClosedRun['status'], reason = ''): ClosedRun => ({ runId: 'r1', status, closeTime, reason });

const prediction: PredictionSnapshot = {
  id: 'p1',
  accountId: 'a1',
  model: 'm',
  versionId: 'v1',
  input: {},
  output: null,
  logs: 'loading\n',
  error: null,
  status: 'processing',
  metrics: { input_token_count: 3 },
  createdAt: '2026-01-01T00:00:00.000Z',
  startedAt: '2026-01-01T00:00:04.000Z',
  completedAt: null,
  revision: 5,
};

test('each way of closing early has its status, error and log line', () => {
  expect(outcomeOf(run('CANCELLED'))).toMatchObject({ status: 'canceled', error: null });
  expect(outcomeOf(run('TERMINATED', 'stuck'))).toMatchObject({ status: 'failed', error: 'terminated by an operator: stuck' });
  expect(outcomeOf(run('TERMINATED')).error).toBe('terminated by an operator: no reason given');
  expect(outcomeOf(run('TIMED_OUT')).status).toBe('failed');
  const failed = outcomeOf(run('FAILED', 'boom'));
  expect(failed.error).toBe('the workflow failed before its last step: boom');
  expect(failed.logLine).toBe(`Error: ${failed.error}`);
});

test('a prediction closed early ends at the close, after every revision written before', () => {
  const final = predictionClosedEarly(prediction, 3, run('TERMINATED', 'stuck'));
  expect(final).toMatchObject({
    status: 'failed',
    error: 'terminated by an operator: stuck',
    logs: 'loading\nError: terminated by an operator: stuck\n',
    completedAt: closeTime.toISOString(),
    revision: prediction.revision + ENGINE_REVISIONS + 1,
  });
  expect(final.metrics).toEqual({ input_token_count: 3, total_time: 10, predict_time: 6 });
  // A row written past the run's own revisions (by the engine's last write) still loses.
  expect(predictionClosedEarly(prediction, 40, run('CANCELLED')).revision).toBe(41);
});

test('a prediction that never started gets no predict_time, and keeps one it had', () => {
  expect(predictionClosedEarly({ ...prediction, startedAt: null }, 0, run('CANCELLED')).metrics).not.toHaveProperty('predict_time');
  const kept = predictionClosedEarly({ ...prediction, metrics: { predict_time: 1 } }, 0, run('CANCELLED'));
  expect(kept.metrics.predict_time).toBe(1);
});

test('a batch closed early takes the outcome and a revision past its row', () => {
  const batch = {
    id: 'batch-1',
    accountId: 'a1',
    model: 'm',
    versionId: 'v1',
    status: 'processing',
    total: 4,
    completed: 1,
    failed: 0,
    chunkSize: 2,
    source: 'api',
    error: null,
    logs: '',
    outputFileId: null,
    createdAt: '2026-01-01T00:00:00.000Z',
    startedAt: null,
    completedAt: null,
    revision: 2,
  } as BatchSnapshot;
  expect(batchClosedEarly(batch, 7, run('CANCELLED'))).toMatchObject({
    status: 'canceled',
    error: null,
    logs: 'Canceled: the workflow was canceled before its last step\n',
    completedAt: closeTime.toISOString(),
    revision: 8,
  });
  expect(batchClosedEarly(batch, 1, run('TIMED_OUT')).revision).toBe(3);
});
