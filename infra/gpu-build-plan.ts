/**
 * Which llama.cpp build a GPU host's engine uses, decided from facts infra/gpu-install.ts gathers
 * (no I/O here, so every case is unit-tested). node-llama-cpp loads its CUDA prebuilt
 * (@node-llama-cpp/linux-x64-cuda, CUDA 13) or, where that one's libraries are missing, the
 * CUDA 12 fallback of -cuda-ext. A prebuilt is good for a card when the loader finds every CUDA
 * library it links and it has machine code (a cubin) for the card's architecture: PTX alone works,
 * but the driver compiles all of it at the first load of every process (minutes; the H100's sm_90
 * is such a case). Otherwise llama.cpp is built from the source node-llama-cpp ships, for the
 * host's cards, once.
 */
import { cpuBuildPlan } from '../lib/llama-cpu-build';
import type { Gpu } from './gpu-host';

export interface PrebuiltCuda {
  /** The package, e.g. '@node-llama-cpp/linux-x64-cuda'. */
  name: string;
  /** CUDA libraries it links that the loader cannot find (ldconfig cache, LD_LIBRARY_PATH). */
  missingLibs: string[];
  /** Architectures with cubins (86 for sm_86). */
  cubins: number[];
}

export type SourceBuildState =
  /** Allowed, and the toolchain is there. */
  | { state: 'possible' }
  /** A build for exactly these options is in node-llama-cpp's local builds. */
  | { state: 'built'; folder: string }
  | { state: 'opted-out' }
  /** A tool the build needs is missing (nvcc, cmake, a C++ compiler). */
  | { state: 'no-toolchain'; missing: string[] }
  /** The last attempt failed; not tried again until its marker is removed. */
  | { state: 'failed'; log: string };

export interface GpuBuildPlanInput {
  gpus: Pick<Gpu, 'index' | 'sm'>[];
  /** In the order node-llama-cpp tries them. */
  prebuilts: PrebuiltCuda[];
  sourceBuild: SourceBuildState;
}

export interface GpuBuildPlan {
  /** Where llama.cpp will run. */
  backend: 'cuda' | 'cpu';
  /** 'prebuilt': a CUDA package as installed; 'source': the local build; 'none': no CUDA build (CPU). */
  build: 'prebuilt' | 'source' | 'none';
  /** The prebuilt package used, where build is 'prebuilt'. */
  prebuilt?: string;
  /** True when the source build must run now (then plan again). */
  needsBuild: boolean;
  reason: string;
  /** Said loudly at start: the host works, but slower than it could. */
  warning?: string;
}

const sm = (n: number) => `sm_${n}`;
const list = (xs: number[]) => xs.map(sm).join(', ');

/**
 * The CMake options of the source build (node-llama-cpp reads NODE_LLAMA_CPP_CMAKE_OPTION_<NAME>),
 * from the host's cards and its CPU's flags (/proc/cpuinfo).
 */
export function sourceBuildCmakeOptions(gpus: Pick<Gpu, 'sm'>[], cpuFlags: string[]): Record<string, string> {
  // The CPU still samples and runs what is not offloaded, so it gets this host's instruction sets
  // as the CPU builds do (lib/llama-cpu-build.ts: named one by one, AMX off, issue 19).
  return {
    ...Object.fromEntries(cpuBuildPlan(cpuFlags).options),
    // Machine code (and PTX) for exactly the host's cards: a build for every architecture takes far longer.
    CMAKE_CUDA_ARCHITECTURES: [...new Set(gpus.map((g) => g.sm))].sort((a, b) => a - b).join(';'),
  };
}

export function planGpuBuild(input: GpuBuildPlanInput): GpuBuildPlan {
  const { gpus, prebuilts, sourceBuild } = input;
  if (gpus.length === 0) return { backend: 'cpu', build: 'none', needsBuild: false, reason: 'no NVIDIA GPU (nvidia-smi lists none)' };
  const archs = [...new Set(gpus.map((g) => g.sm))].sort((a, b) => a - b);
  // The one node-llama-cpp would load: the first whose libraries are all found.
  const loadable = prebuilts.find((p) => p.missingLibs.length === 0);
  // An arch-specific cubin (sm_90a, sm_120a) runs only on its own architecture, so only an exact match counts.
  const uncovered = loadable ? archs.filter((a) => !loadable.cubins.includes(a)) : archs;
  if (loadable && uncovered.length === 0) {
    return {
      backend: 'cuda',
      build: 'prebuilt',
      prebuilt: loadable.name,
      needsBuild: false,
      reason: `${loadable.name} has cubins for ${list(archs)} and the loader finds its CUDA libraries`,
    };
  }
  const problem = loadable
    ? `${loadable.name} has no cubins for ${list(uncovered)} (only PTX or nothing: the driver would compile it at every first load)`
    : prebuilts.length === 0
      ? 'no CUDA prebuilt of node-llama-cpp is installed'
      : `the loader does not find the CUDA libraries of ${prebuilts.map((p) => `${p.name} (${p.missingLibs.join(', ')})`).join(' or ')}`;
  const fallback = (why: string): GpuBuildPlan =>
    loadable
      ? {
          backend: 'cuda',
          build: 'prebuilt',
          prebuilt: loadable.name,
          needsBuild: false,
          reason: `${problem}; ${why}`,
          warning: `llama.cpp uses ${loadable.name} with PTX compiled by the driver for ${list(uncovered)}: the first model load of each engine worker is slow`,
        }
      : {
          backend: 'cpu',
          build: 'none',
          needsBuild: false,
          reason: `${problem}; ${why}`,
          warning: 'llama.cpp runs on the CPU on this GPU host',
        };
  switch (sourceBuild.state) {
    case 'built':
      return {
        backend: 'cuda',
        build: 'source',
        needsBuild: false,
        reason: `${problem}; using llama.cpp built from node-llama-cpp's source for ${list(archs)} (${sourceBuild.folder})`,
      };
    case 'possible':
      return {
        backend: 'cuda',
        build: 'source',
        needsBuild: true,
        reason: `${problem}; building llama.cpp from node-llama-cpp's source for ${list(archs)}`,
      };
    case 'opted-out':
      return fallback('no source build (KILN_GPU_SOURCE_BUILD=false)');
    case 'no-toolchain':
      return fallback(`cannot build llama.cpp from source: no ${sourceBuild.missing.join(', ')}`);
    case 'failed':
      return fallback(`the last source build failed (log: ${sourceBuild.log}); remove its .failed marker to try again`);
  }
}

/**
 * Where the dynamic loader finds each library: LD_LIBRARY_PATH first, then the ldconfig cache
 * (`ldconfig -p`, 64-bit entries only). null where it finds none.
 */
export function findLoaderLibs(
  names: string[],
  facts: { ldconfig: string; ldLibraryPath: string; exists: (file: string) => boolean },
): Record<string, string | null> {
  const cache = new Map<string, string>();
  for (const line of facts.ldconfig.split('\n')) {
    const m = /^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)/.exec(line);
    if (m && m[2].includes('x86-64') && !cache.has(m[1])) cache.set(m[1], m[3]);
  }
  const dirs = facts.ldLibraryPath.split(':').filter(Boolean);
  return Object.fromEntries(
    names.map((name) => {
      const inPath = dirs.map((d) => `${d.replace(/\/+$/, '')}/${name}`).find(facts.exists);
      return [name, inPath ?? cache.get(name) ?? null];
    }),
  );
}

/**
 * The CUDA libraries a prebuilt needs the loader to find, from its DT_NEEDED list: the CUDA
 * runtime ones (libcu*), plus cuBLASLt, which cuBLAS loads in turn. libcuda.so.1 is the driver's.
 */
export function cudaLibrariesNeeded(needed: string[]): string[] {
  const cuda = needed.filter((n) => n.startsWith('libcu'));
  const lt = cuda.flatMap((n) => {
    const m = /^libcublas\.so\.(\d+)$/.exec(n);
    return m ? [`libcublasLt.so.${m[1]}`] : [];
  });
  return [...new Set([...cuda, ...lt])];
}
