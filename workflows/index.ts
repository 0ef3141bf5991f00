export { predictionWorkflow, predictionQuery, predictionStartedSignal } from './prediction';
