/**
 * What the llama.cpp engine loads, on the engine worker's /metrics: a LoRA adapter runs on its
 * base's weights, so adapters count as contexts and only bases as weight loads.
 */
import client from 'prom-client';
import { registry } from '../../lib/metrics';
import type { LlamaLoadObserver } from './engine';

const modelLoads = new client.Counter({
  name: 'kiln_llama_model_loads_total',
  help: 'GGUF models loaded into memory (weights), by version',
  labelNames: ['version'],
  registers: [registry],
});

const adapterLoads = new client.Counter({
  name: 'kiln_llama_adapter_loads_total',
  help: 'LoRA adapters applied to a loaded base model (a context each, no copy of the weights), by adapter and base version',
  labelNames: ['version', 'base'],
  registers: [registry],
});

export const llamaLoadMetrics: LlamaLoadObserver = {
  modelLoaded: (version) => modelLoads.inc({ version }),
  adapterLoaded: (version, base) => adapterLoads.inc({ version, base }),
};
