/**
 * Keeps a deployment's min_instances warm: places and loads the version on up to that many
 * distinct nodes, ahead of any prediction. Engine nodes never scale pinned versions to zero.
 */
import { engineOnNode, placeModel } from './placement';

export async function warmDeploymentWorkflow({ versionId, replicas }: { versionId: string; replicas: number }): Promise<string[]> {
  const holding: string[] = [];
  while (holding.length < replicas) {
    const place = await placeModel(versionId, holding);
    // Placement came back to a node that already holds a replica: there is no other node.
    if (holding.includes(place.nodeId)) break;
    if (!place.warm) await engineOnNode(place.nodeId).loadModel({ versionId });
    holding.push(place.nodeId);
  }
  return holding;
}
