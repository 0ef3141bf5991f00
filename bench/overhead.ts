/**
 * What durable orchestration costs next to inference: warm predictions on kiln/tiny-llama at
 * several concurrencies, total_time − predict_time and the client's end-to-end latency, next to
 * the same generation run directly on node-llama-cpp in this process, in the same run.
 */
import path from 'node:path';
import { textGenerationInput } from '../domain/tasks/text-generation';
import { LlamaEngine } from '../engines/llama/engine';
import { TINY_LLAMA } from '../infra/seed';
import { writeLlamaGguf } from '../tools/gguf/gguf-writer';
import { Floor } from './floor/bare';
import { apiToken, call, DATA_DIR, ms, percentile, pool, saveResult, table } from './lib';

const INPUT = { prompt: 'The kiln was', max_tokens: 16, min_tokens: 16 };

export async function overhead(opts: { requests: number; concurrency: number[] }) {
  const token = await apiToken();
  // Warm the model up first: this scenario is about warm predictions.
  await call(token, '/v1/models/kiln/tiny-llama/predictions', { input: INPUT }, { prefer: 'wait' });

  // The floor at each concurrency too: a bare one-activity workflow's start → close on the same server.
  const floor = await Floor.start();
  const rows = [];
  for (const concurrency of opts.concurrency) {
    const started = performance.now();
    const samples = await pool(opts.requests, concurrency, async () => {
      const t0 = performance.now();
      const p = await call(token, '/v1/models/kiln/tiny-llama/predictions', { input: INPUT }, { prefer: 'wait=60' });
      const e2e = performance.now() - t0;
      if (p.status !== 'succeeded') throw new Error(`prediction ${p.id} ${p.status}`);
      const overhead = (p.metrics.total_time - p.metrics.predict_time) * 1000;
      const queue = (p.metrics.queue_time ?? 0) * 1000;
      return { e2e, overhead, queue, orchestration: overhead - queue, predict: p.metrics.predict_time * 1000 };
    });
    const seconds = (performance.now() - started) / 1000;
    const bare = await floor.run(opts.requests, concurrency);
    const o = samples.map((s) => s.overhead);
    const e = samples.map((s) => s.e2e);
    rows.push({
      concurrency,
      requests: opts.requests,
      'overhead p50': ms(percentile(o, 50)),
      'overhead p99': ms(percentile(o, 99)),
      // The wait for one of the model's sequences (4 on tiny-llama) is queueing, not orchestration.
      'queue p50': ms(
        percentile(
          samples.map((s) => s.queue),
          50,
        ),
      ),
      'excl. queue p50': ms(
        percentile(
          samples.map((s) => s.orchestration),
          50,
        ),
      ),
      'excl. queue p99': ms(
        percentile(
          samples.map((s) => s.orchestration),
          99,
        ),
      ),
      'e2e p50': ms(percentile(e, 50)),
      'e2e p99': ms(percentile(e, 99)),
      'predict_time p50': ms(
        percentile(
          samples.map((s) => s.predict),
          50,
        ),
      ),
      'predictions/s': Number((opts.requests / seconds).toFixed(1)),
      'floor start→close p50': ms(percentile(bare.latencies, 50)),
      'floor start→close p99': ms(percentile(bare.latencies, 99)),
      'overhead p50 ÷ floor': `${(percentile(o, 50) / percentile(bare.latencies, 50)).toFixed(2)}×`,
      'floor /s': Number(bare.throughput.toFixed(1)),
    });
  }
  await floor.stop();

  // The floor: the same generation, straight on llama.cpp, in this process.
  const file = path.join(DATA_DIR, 'seed', 'tiny-llama.gguf');
  await writeLlamaGguf(file, TINY_LLAMA);
  const engine = new LlamaEngine({ gpu: 'auto', contextSize: 4096, sequences: 4, threads: 1 });
  await engine.load('direct', file);
  const direct: number[] = [];
  for (let i = 0; i < opts.requests; i++) {
    const t0 = performance.now();
    await engine.generate('direct', textGenerationInput.parse(INPUT));
    direct.push(performance.now() - t0);
  }
  await engine.dispose();
  rows.push({
    concurrency: 'direct (node-llama-cpp)',
    requests: opts.requests,
    'overhead p50': ms(0),
    'overhead p99': ms(0),
    'queue p50': ms(0),
    'excl. queue p50': ms(0),
    'excl. queue p99': ms(0),
    'e2e p50': ms(percentile(direct, 50)),
    'e2e p99': ms(percentile(direct, 99)),
    'predict_time p50': ms(percentile(direct, 50)),
    'predictions/s': Number((1000 / percentile(direct, 50)).toFixed(1)),
    'floor start→close p50': '-',
    'floor start→close p99': '-',
    'overhead p50 ÷ floor': '-',
    'floor /s': '-',
  });
  table(
    'Overhead: warm kiln/tiny-llama, 16 tokens (overhead = total_time − predict_time; excl. queue: minus queue_time, the wait for a free sequence)',
    rows,
  );
  console.log(`saved ${await saveResult('overhead', rows)}`);
}
