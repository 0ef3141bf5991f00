/** GPUs from nvidia-smi's CSV, as GPU hosts print it, and the engine workers a host runs. */
import { describeGpu, enginePrograms, listGpus, parseNvidiaSmi } from '../../infra/gpu-host';

const MiB = 2 ** 20;

test('an H100 host: index, name, VRAM and compute capability (sm_90)', () => {
  const gpus = parseNvidiaSmi('0, NVIDIA H100 80GB HBM3, 81559 MiB, 9.0\n');
  expect(gpus).toEqual([{ index: 0, name: 'NVIDIA H100 80GB HBM3', memoryBytes: 81_559 * MiB, computeCap: '9.0', sm: 90 }]);
  expect(describeGpu(gpus[0])).toBe('GPU 0: NVIDIA H100 80GB HBM3, 79.6 GiB, sm_90');
});

test('a host with two different GPUs: one engine worker each, named by index', () => {
  const gpus = parseNvidiaSmi('0, NVIDIA GeForce RTX 4090, 24564 MiB, 8.9\n1, NVIDIA A100-SXM4-40GB, 40960 MiB, 8.0\n');
  expect(gpus.map((g) => [g.index, g.sm, g.memoryBytes])).toEqual([
    [0, 89, 24_564 * MiB],
    [1, 80, 40_960 * MiB],
  ]);
  expect(enginePrograms(gpus)).toEqual(['engine-worker-gpu0', 'engine-worker-gpu1']);
});

test('no GPU: the one CPU engine-worker, as on a host without nvidia-smi', async () => {
  expect(parseNvidiaSmi('')).toEqual([]);
  expect(enginePrograms([])).toEqual(['engine-worker']);
  expect(await listGpus('/nonexistent/nvidia-smi')).toEqual([]);
  // nvidia-smi present but failing (driver not loaded) exits non-zero: no GPUs either.
  expect(await listGpus('false')).toEqual([]);
});

test('a name with a comma keeps it; a line it cannot read is an error, not a GPU with made-up numbers', () => {
  expect(parseNvidiaSmi('2, Some, Card, 1024 MiB, 12.0')[0]).toMatchObject({ index: 2, name: 'Some, Card', sm: 120 });
  expect(() => parseNvidiaSmi('0, NVIDIA H100 80GB HBM3, [N/A], 9.0')).toThrow(/cannot read GPU line/);
  expect(() => parseNvidiaSmi('No devices were found')).toThrow(/cannot read GPU line/);
});
