export { batchQuery, batchWorkflow } from './batch';
export { predictionQuery, predictionStartedSignal, predictionWorkflow } from './prediction';
export { reconcilerWorkflow } from './reconciler';
export { replicaScalerWorkflow } from './replica-scaler';
export { warmDeploymentWorkflow } from './warm-deployment';
export { webhookDeliveryWorkflow } from './webhook-delivery';
