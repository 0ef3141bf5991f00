/** The echo fixture's runs (tests and benchmarks of the orchestration; no inference). */
import { kilnFailure } from '../domain/failures';
import type { echoFixtureInput } from '../fixtures/echo-engine';
import { round } from './figures';
import type { TaskRunner } from './task-run';

type EchoFixtureInput = import('zod').output<typeof echoFixtureInput>;

export const runEchoFixture: TaskRunner<EchoFixtureInput> = async ({ req, input, ctx, startedAt, queueSeconds, mode, deps }) => {
  if (!deps.echoFixture) throw kilnFailure('InvalidInput', 'fixtures are not enabled on this node');
  const t0 = performance.now();
  // Heartbeats carry cancellation to the activity, and keep a long sleep alive.
  const beat = setInterval(() => mode.heartbeat({}), 1000);
  const r = await deps.echoFixture.run(input, ctx.cancellationSignal, req.predictionId).finally(() => clearInterval(beat));
  if (r.aborted && !ctx.cancellationDetails?.cancelRequested)
    throw kilnFailure('EngineInterrupted', `interrupted on node ${deps.node.nodeId}`);
  const seconds = (performance.now() - t0) / 1000;
  return {
    output: r.output,
    logs: [`echo fixture: slept ${(seconds * 1000).toFixed(0)} ms on node ${deps.node.nodeId}`],
    metrics: { predict_time: round(seconds), queue_time: round(queueSeconds) },
    startedAt,
    aborted: r.aborted,
    hardware: 'fixture',
  };
};
