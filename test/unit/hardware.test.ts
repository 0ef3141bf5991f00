/** A node's placement budget and SKU from a given GPU state (as node-llama-cpp reports it), and ModelTooLarge's message. */
import { gpuName, gpuSku, nodeCapacity, skuOfNode, tooLargeMessage, VRAM_RESERVE_FRACTION } from '../../lib/hardware';

const MiB = 2 ** 20;
// What getVramState() and getGpuDeviceNames() said on the H100 host (notes/engines.md).
const h100 = { names: ['NVIDIA H100 80GB HBM3'], vram: { total: 81_079 * MiB, used: 527 * MiB, free: 80_552 * MiB } };

test('on a GPU the budget is the free VRAM less a reserve, and the SKU names the card and its memory', () => {
  const c = nodeCapacity({ gpu: h100, cpuMemoryBytes: 64_000 * MiB });
  expect(c.gpu).toBe('NVIDIA H100 80GB HBM3');
  expect(c.sku).toBe('gpu-h100-80gb');
  expect(c.memoryBytes).toBe(h100.vram.free - Math.ceil(h100.vram.total * VRAM_RESERVE_FRACTION));
  // RAM does not count on a GPU node: the weights and KV cache live in VRAM.
  expect(c.memoryBytes).toBeLessThan(h100.vram.free);
});

test('VRAM already in use at start (another process on the card) is not offered', () => {
  const busy = { ...h100, vram: { total: h100.vram.total, used: 60_000 * MiB, free: 21_079 * MiB } };
  expect(nodeCapacity({ gpu: busy, cpuMemoryBytes: 1 }).memoryBytes).toBeLessThan(21_079 * MiB);
});

test('on CPU (no GPU, or VRAM off) the budget is the configured memory and the SKU is cpu', () => {
  expect(nodeCapacity({ gpu: null, cpuMemoryBytes: 12_000 * MiB })).toEqual({ memoryBytes: 12_000 * MiB, gpu: null, sku: 'cpu' });
  const off = { names: [], vram: { total: 0, used: 0, free: 0 } };
  expect(nodeCapacity({ gpu: off, cpuMemoryBytes: 5 * MiB }).sku).toBe('cpu');
});

test('SKUs of other cards: the memory the name states, else the VRAM in GiB', () => {
  const sku = (name: string, total: number) => gpuSku(gpuName(name, total));
  expect(sku('NVIDIA A100-SXM4-40GB', 40_960 * MiB)).toBe('gpu-a100-40gb');
  expect(sku('NVIDIA GeForce RTX 4090', 24_564 * MiB)).toBe('gpu-rtx-4090-24gb');
  expect(sku('NVIDIA L4', 23_034 * MiB)).toBe('gpu-l4-22gb');
  expect(sku('NVIDIA H200', 143_771 * MiB)).toBe('gpu-h200-140gb');
});

test('a node row gives the same SKU the node registered with, whatever VRAM was free', () => {
  for (const names of [h100.names, ['NVIDIA GeForce RTX 4090']]) {
    for (const free of [h100.vram.free, 3_000 * MiB]) {
      const c = nodeCapacity({ gpu: { names, vram: { ...h100.vram, free } }, cpuMemoryBytes: 1 });
      expect(skuOfNode({ gpu: c.gpu })).toBe(c.sku);
    }
  }
  expect(skuOfNode({ gpu: null })).toBe('cpu');
});

test('ModelTooLarge names what the model needs and what the largest node has', () => {
  expect(tooLargeMessage(90_000 * MiB, { gpu: 'NVIDIA H100 80GB HBM3', memoryBytes: 76_498 * MiB })).toBe(
    'model needs 90,000 MiB (weights plus context × sequences); the largest node has 76,498 MiB of VRAM on NVIDIA H100 80GB HBM3',
  );
  expect(tooLargeMessage(3 * MiB, { gpu: null, memoryBytes: 2 * MiB })).toMatch(/needs 3 MiB .* has 2 MiB of memory$/);
});
