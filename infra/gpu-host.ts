/**
 * The NVIDIA GPUs of this host, as `nvidia-smi` lists them, and the engine worker each one gets
 * (`npm start` runs one per GPU: infra/gpu-install.ts lists them, infra/app.sh runs them). No
 * nvidia-smi, or one that fails (no driver loaded), means no GPUs: the host runs the one CPU
 * `engine-worker` as before.
 *
 * KILN_NVIDIA_SMI names the command (default `nvidia-smi`), so the per-GPU path can be driven on
 * a machine without a GPU by a script that prints what a GPU host's nvidia-smi prints.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

export interface Gpu {
  /** nvidia-smi's index: what CUDA_VISIBLE_DEVICES names with CUDA_DEVICE_ORDER=PCI_BUS_ID. */
  index: number;
  name: string;
  memoryBytes: number;
  /** Compute capability as nvidia-smi prints it, e.g. '9.0'. */
  computeCap: string;
  /** The CUDA architecture number of that capability, e.g. 90 (sm_90). */
  sm: number;
}

/** The columns parseNvidiaSmi reads, in this order. */
export const NVIDIA_SMI_ARGS = ['--query-gpu=index,name,memory.total,compute_cap', '--format=csv,noheader'];

const UNITS: Record<string, number> = { KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30 };

/** Parses `nvidia-smi --query-gpu=index,name,memory.total,compute_cap --format=csv,noheader`. */
export function parseNvidiaSmi(csv: string): Gpu[] {
  const gpus: Gpu[] = [];
  for (const line of csv.split('\n')) {
    if (!line.trim()) continue;
    const cells = line.split(',').map((c) => c.trim());
    if (cells.length < 4) throw new Error(`nvidia-smi: cannot read GPU line '${line}'`);
    // A name with a comma in it would split: the first and the last two cells are fixed.
    const [indexCell, ...rest] = cells;
    const computeCap = rest.pop()!;
    const memoryCell = rest.pop()!;
    const name = rest.join(', ');
    const memory = /^(\d+(?:\.\d+)?)\s*(KiB|MiB|GiB)$/.exec(memoryCell);
    const cap = /^(\d+)\.(\d+)$/.exec(computeCap);
    if (!/^\d+$/.test(indexCell) || !memory || !cap) throw new Error(`nvidia-smi: cannot read GPU line '${line}'`);
    gpus.push({
      index: Number(indexCell),
      name,
      memoryBytes: Math.round(Number(memory[1]) * UNITS[memory[2]]),
      computeCap,
      sm: Number(cap[1]) * 10 + Number(cap[2]),
    });
  }
  return gpus;
}

/** The GPUs nvidia-smi lists; none where it is missing or fails (no driver, no device). */
export async function listGpus(command = process.env.KILN_NVIDIA_SMI || 'nvidia-smi'): Promise<Gpu[]> {
  let stdout: string;
  try {
    ({ stdout } = await promisify(execFile)(command, NVIDIA_SMI_ARGS, { encoding: 'utf8', timeout: 30_000 }));
  } catch {
    return [];
  }
  return parseNvidiaSmi(stdout);
}

/** The supervisor's name for the engine worker of a GPU: its pid, ready and log files are named by it. */
export function engineProgramName(gpu: Pick<Gpu, 'index'>): string {
  return `engine-worker-gpu${gpu.index}`;
}

/** The engine programs a host runs: one per GPU, or the one CPU engine-worker. */
export function enginePrograms(gpus: Pick<Gpu, 'index'>[]): string[] {
  return gpus.length === 0 ? ['engine-worker'] : gpus.map(engineProgramName);
}

export const GiB = (bytes: number) => `${(bytes / 2 ** 30).toFixed(1)} GiB`;

/** 'GPU 0: NVIDIA H100 80GB HBM3, 79.6 GiB, sm_90' */
export function describeGpu(gpu: Gpu): string {
  return `GPU ${gpu.index}: ${gpu.name}, ${GiB(gpu.memoryBytes)}, sm_${gpu.sm}`;
}
