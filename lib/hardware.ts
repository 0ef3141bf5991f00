/**
 * What an engine node offers placement, and the hardware SKU it is billed and listed as. On a GPU
 * the budget is the card's VRAM (llama.cpp puts weights and KV cache there), less a reserve for
 * the CUDA context and compute buffers; on CPU it is the configured share of RAM.
 */

/** llama.getVramState() of node-llama-cpp, in bytes. */
export interface VramState {
  total: number;
  used: number;
  free: number;
}

/** The GPU one engine worker drives (one worker per GPU, CUDA_VISIBLE_DEVICES). */
export interface GpuState {
  /** llama.getGpuDeviceNames(), e.g. ['NVIDIA H100 80GB HBM3']. */
  names: string[];
  vram: VramState;
}

export interface NodeCapacity {
  /** Bytes placement may pack with models (weights plus context × sequences). */
  memoryBytes: number;
  /** The GPU's name, or null on CPU. */
  gpu: string | null;
  sku: string;
}

/** Held back from the VRAM that is free at start: CUDA context, cuBLAS workspace, compute buffers. */
export const VRAM_RESERVE_FRACTION = 0.05;
const MIN_VRAM_RESERVE = 512 * 2 ** 20;

export function nodeCapacity(opts: { gpu: GpuState | null; cpuMemoryBytes: number }): NodeCapacity {
  const { gpu } = opts;
  if (!gpu || gpu.vram.total <= 0) return { memoryBytes: opts.cpuMemoryBytes, gpu: null, sku: 'cpu' };
  const name = gpuName(gpu.names[0] ?? 'GPU', gpu.vram.total);
  const reserve = Math.max(MIN_VRAM_RESERVE, Math.ceil(gpu.vram.total * VRAM_RESERVE_FRACTION));
  return { memoryBytes: Math.max(0, gpu.vram.free - reserve), gpu: name, sku: gpuSku(name) };
}

/** The device name, with its memory appended where the name does not state it ('NVIDIA L4 22GB'). */
export function gpuName(deviceName: string, totalBytes: number): string {
  return /\d+\s*GB\b/i.test(deviceName) ? deviceName : `${deviceName} ${Math.round(totalBytes / 2 ** 30)}GB`;
}

/**
 * `gpu-h100-80gb` from 'NVIDIA H100 80GB HBM3' (a name as gpuName gives it): the model's name
 * without vendor, brand and memory-type words, then the memory the name states.
 */
export function gpuSku(name: string): string {
  const gb = /(\d+)\s*GB\b/i.exec(name)?.[1];
  const words = name
    .toLowerCase()
    .replace(/\(.*?\)/g, ' ')
    .replace(/\b\d+\s*gb\b/g, ' ')
    .replace(/\b(nvidia|amd|intel|apple|geforce|radeon|tesla|quadro|hbm\d*e?|pcie|sxm\d*|nvl|graphics|gpu)\b/g, ' ')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
  return `gpu-${words || 'unknown'}${gb ? `-${gb}gb` : ''}`;
}

/** The SKU of a node row (the GPU name it registered, or CPU). */
export function skuOfNode(node: { gpu: string | null }): string {
  return node.gpu ? gpuSku(node.gpu) : 'cpu';
}

const mib = (bytes: number) => `${Math.round(bytes / 2 ** 20).toLocaleString('en-US')} MiB`;

/** ModelTooLarge's message: what the model needs and what the largest node has, with its kind. */
export function tooLargeMessage(needBytes: number, largest: { gpu: string | null; memoryBytes: number } | undefined): string {
  if (!largest) return `model needs ${mib(needBytes)} (weights plus context × sequences); no engine node is up`;
  const kind = largest.gpu ? `of VRAM on ${largest.gpu}` : 'of memory';
  return `model needs ${mib(needBytes)} (weights plus context × sequences); the largest node has ${mib(largest.memoryBytes)} ${kind}`;
}
