/**
 * Worker options that decide what orchestration costs, in one place: the control worker and the
 * engine's model workers use them, and so does the benchmark's bare-Temporal floor
 * (bench/floor), so that the floor runs with exactly what Kiln runs with.
 */
import type { WorkerOptions } from '@temporalio/worker';

/** The control worker: workflows and its cheap activities. */
export function controlWorkerTuning(concurrency: number): Partial<WorkerOptions> {
  return {
    // Keep the backlog in Temporal's fair queues, not in this process: a worker that pulls in
    // hundreds of tasks serves them first come, first served, whatever their fairness key.
    maxConcurrentWorkflowTaskExecutions: concurrency,
    maxConcurrentLocalActivityExecutions: concurrency,
    maxConcurrentActivityTaskExecutions: concurrency * 4,
  };
}

/** A model's queue on an engine node: as many tasks at once as the engine has sequences. */
export function modelWorkerTuning(concurrency: number): Partial<WorkerOptions> {
  return {
    maxConcurrentActivityTaskExecutions: concurrency,
    // Cancellation reaches an activity through its heartbeat, at most this long after it is asked
    // for; sent no more often than the engine's liveness beat (activities/engine.ts).
    maxHeartbeatThrottleInterval: '1 second',
  };
}
