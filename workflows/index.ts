export { predictionWorkflow, predictionQuery, predictionStartedSignal } from './prediction';
export { webhookDeliveryWorkflow } from './webhook-delivery';
