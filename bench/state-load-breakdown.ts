/**
 * Where a KV state load's time goes, beside the prefill it replaces, with flash attention off and
 * on (the V cache's layout differs: transposed without it, so a state is written and read row by
 * row): in a context of its own per setting, a cold prefill of the prompt, llama.cpp's save of the
 * state, a plain read of the file (page cache), and the state's load into the cleared sequence (the
 * best of three). The GPU check prints it after its own figures (bench/gpu-check.ts).
 */
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { Llama } from 'node-llama-cpp';

export interface StateLoadRow {
  'flash attention': string;
  'prefill ms': number;
  'save ms': number;
  'state MiB': number;
  'file read ms': number;
  'state load ms': number;
  'prefill ÷ load': number;
}

export async function stateLoadBreakdown(
  llama: Llama,
  o: { model: string; prompt: string; contextSize: number; threads: number; dir: string },
): Promise<StateLoadRow[]> {
  const model = await llama.loadModel({ modelPath: o.model });
  const rows: StateLoadRow[] = [];
  try {
    const tokens = model.tokenize(o.prompt);
    for (const flashAttention of [false, true]) {
      const context = await model.createContext({ sequences: 1, contextSize: o.contextSize, flashAttention, threads: o.threads });
      const file = path.join(o.dir, `state-load-${flashAttention ? 'fa' : 'nofa'}.kvstate`);
      try {
        const sequence = context.getSequence();
        let t0 = performance.now();
        await sequence.evaluateWithoutGeneratingNewTokens(tokens);
        const prefill = performance.now() - t0;
        t0 = performance.now();
        await sequence.saveStateToFile(file);
        const save = performance.now() - t0;
        t0 = performance.now();
        const bytes = readFileSync(file).length;
        const read = performance.now() - t0;
        const loads: number[] = [];
        for (let i = 0; i < 3; i++) {
          await sequence.clearHistory();
          t0 = performance.now();
          await sequence.loadStateFromFile(file, { acceptRisk: true });
          loads.push(performance.now() - t0);
        }
        const load = Math.min(...loads);
        rows.push({
          'flash attention': String(context.flashAttention),
          'prefill ms': round(prefill),
          'save ms': round(save),
          'state MiB': round(bytes / 2 ** 20),
          'file read ms': round(read),
          'state load ms': round(load),
          'prefill ÷ load': round(prefill / load, 2),
        });
      } finally {
        await context.dispose();
        await rm(file, { force: true });
      }
    }
  } finally {
    await model.dispose();
  }
  return rows;
}

const round = (v: number, digits = 1) => Number(v.toFixed(digits));
