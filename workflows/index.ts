export { predictionWorkflow, predictionQuery, predictionStartedSignal } from './prediction';
export { warmDeploymentWorkflow } from './warm-deployment';
export { webhookDeliveryWorkflow } from './webhook-delivery';
