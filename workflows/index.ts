export { predictionWorkflow, predictionQuery, predictionStartedSignal } from './prediction';
export { warmDeploymentWorkflow } from './warm-deployment';
export { webhookDeliveryWorkflow } from './webhook-delivery';
export { replicaScalerWorkflow } from './replica-scaler';
export { batchWorkflow, batchQuery } from './batch';
export { reconcilerWorkflow } from './reconciler';
