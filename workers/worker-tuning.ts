/**
 * Worker options that decide what orchestration costs, in one place: the control worker and the
 * engine's model workers use them, and so does the benchmark's bare-Temporal floor
 * (bench/floor), so that the floor runs with exactly what Kiln runs with.
 */
import type { WorkerOptions } from '@temporalio/worker';
import { RampedSlots, type VersionBacklog } from './ramped-slots';

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

/**
 * A model's queue on an engine node: as many tasks at once as the engine has sequences. Given the
 * version's backlog, the slots fill one slot interval apart when a backlog meets a free engine
 * (workers/ramped-slots.ts), so that they come free one at a time and a fair queue's next task
 * waits about an interval, not a whole service time.
 */
export function modelWorkerTuning(concurrency: number, readBacklog?: () => Promise<VersionBacklog>): Partial<WorkerOptions> {
  // A model worker runs no workflows, local activities or Nexus tasks: the SDK's defaults for those.
  const unused = { type: 'fixed-size', numSlots: 100 } as const;
  return {
    ...(readBacklog
      ? {
          tuner: {
            activityTaskSlotSupplier: new RampedSlots(concurrency, readBacklog),
            workflowTaskSlotSupplier: unused,
            localActivityTaskSlotSupplier: unused,
            nexusTaskSlotSupplier: unused,
          },
        }
      : { maxConcurrentActivityTaskExecutions: concurrency }),
    // Cancellation reaches an activity through its heartbeat, at most this long after it is asked
    // for; sent no more often than the engine's liveness beat (activities/engine.ts).
    maxHeartbeatThrottleInterval: '1 second',
  };
}
