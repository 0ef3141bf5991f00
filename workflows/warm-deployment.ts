/**
 * Keeps a deployment's min_instances warm: places and loads the version on up to that many
 * distinct nodes, ahead of any prediction. Engine nodes never scale pinned versions to zero.
 */
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { createControlActivities } from '../activities/control';
import type { createEngineActivities } from '../activities/engine';
import { NON_RETRYABLE_TYPES } from './failures';
import { nodeQueue } from './types';

type ControlActivities = ReturnType<typeof createControlActivities>;
type EngineActivities = ReturnType<typeof createEngineActivities>;

const { placeModel } = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '10 seconds',
  scheduleToCloseTimeout: '5 minutes',
  retry: { initialInterval: '500 ms', maximumInterval: '5 seconds', nonRetryableErrorTypes: NON_RETRYABLE_TYPES },
});

export async function warmDeploymentWorkflow({ versionId, replicas }: { versionId: string; replicas: number }): Promise<string[]> {
  const holding: string[] = [];
  while (holding.length < replicas) {
    const place = await placeModel({ versionId, excludeNodes: holding });
    // Placement came back to a node that already holds a replica: there is no other node.
    if (holding.includes(place.nodeId)) break;
    if (!place.warm) {
      const { loadModel } = proxyActivities<EngineActivities>({
        taskQueue: nodeQueue(place.nodeId),
        scheduleToStartTimeout: '30 seconds',
        startToCloseTimeout: '30 minutes',
        heartbeatTimeout: '30 seconds',
        retry: { maximumAttempts: 2, nonRetryableErrorTypes: NON_RETRYABLE_TYPES },
      });
      await loadModel({ versionId });
    }
    holding.push(place.nodeId);
  }
  return holding;
}
