/**
 * The GPU host check of `npm start` (infra/gpu-install.sh runs it): gathers what decides the
 * llama.cpp build (the GPUs, the CUDA libraries the loader finds, the architectures each
 * node-llama-cpp CUDA prebuilt has cubins for, the toolchain, an earlier source build), decides
 * with planGpuBuild, prints the backend, the GPUs, their VRAM and the build, and writes:
 *
 *   STATE/gpu-build.json         the plan and the GPUs (npm run status shows it)
 *   STATE/gpu-build.env          NODE_LLAMA_CPP_CMAKE_OPTION_* of the source build in use, which the
 *                                engine workers load so node-llama-cpp picks that build (absent otherwise)
 *   STATE/gpu-build.pending.env  the same options plus CUDACXX, for the build the shell runs now
 *
 *   gpu-install --state-dir STATE    prints `build` (run the source build, then this again) or `ready`
 *
 * KILN_GPU_SOURCE_BUILD=false: never build; use the prebuilt as it is (or the CPU).
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { cpuinfoFlags } from '../lib/llama-cpu-build';
import { KILN_ROOT } from './checkout';
import { readCudaBinary } from './cuda-binary';
import {
  cudaLibrariesNeeded,
  findLoaderLibs,
  type GpuBuildPlan,
  type PrebuiltCuda,
  planGpuBuild,
  type SourceBuildState,
  sourceBuildCmakeOptions,
} from './gpu-build-plan';
import { describeGpu, enginePrograms, type Gpu, listGpus } from './gpu-host';

/** What STATE/gpu-build.json holds. */
export interface GpuBuildState {
  at: string;
  gpus: Gpu[];
  plan: GpuBuildPlan;
  /** The engine programs npm start runs. */
  programs: string[];
}

export const GPU_BUILD_STATE = 'gpu-build.json';
export const GPU_BUILD_ENV = 'gpu-build.env';
const PENDING_ENV = 'gpu-build.pending.env';
/** Left by gpu-install.sh when the source build failed. */
const FAILED_MARKER = 'gpu-build.failed';
const CMAKE_OPTION_PREFIX = 'NODE_LLAMA_CPP_CMAKE_OPTION_';

const nodeLlamaCpp = path.join(KILN_ROOT, 'node_modules', 'node-llama-cpp');

/** node-llama-cpp's CUDA prebuilts for linux-x64, in the order it tries them. */
const PREBUILTS = [
  { name: '@node-llama-cpp/linux-x64-cuda', lib: 'bins/linux-x64-cuda/libggml-cuda.so' },
  { name: '@node-llama-cpp/linux-x64-cuda-ext', lib: 'bins/linux-x64-cuda/fallback/libggml-cuda.so' },
];

async function run(command: string, args: string[]): Promise<string | null> {
  try {
    return (await promisify(execFile)(command, args, { encoding: 'utf8', maxBuffer: 64 * 2 ** 20 })).stdout;
  } catch {
    return null;
  }
}

async function which(command: string): Promise<string | null> {
  const found = await run('bash', ['-c', `command -v ${command}`]);
  return found?.trim() || null;
}

async function prebuilts(): Promise<PrebuiltCuda[]> {
  const ldconfig = (await run('ldconfig', ['-p'])) ?? (await run('/sbin/ldconfig', ['-p'])) ?? '';
  const found: PrebuiltCuda[] = [];
  for (const p of PREBUILTS) {
    const lib = path.join(KILN_ROOT, 'node_modules', p.name, p.lib);
    if (!existsSync(lib)) continue;
    const binary = await readCudaBinary(lib);
    const libs = findLoaderLibs(cudaLibrariesNeeded(binary.needed), {
      ldconfig,
      ldLibraryPath: process.env.LD_LIBRARY_PATH ?? '',
      exists: existsSync,
    });
    found.push({ name: p.name, missingLibs: Object.keys(libs).filter((n) => libs[n] === null), cubins: binary.cubins });
  }
  return found;
}

/** The nvcc CMake will use: CUDACXX, PATH, or the toolkit's usual place. */
async function findNvcc(): Promise<string | null> {
  if (process.env.CUDACXX && existsSync(process.env.CUDACXX)) return process.env.CUDACXX;
  return (await which('nvcc')) ?? (existsSync('/usr/local/cuda/bin/nvcc') ? '/usr/local/cuda/bin/nvcc' : null);
}

/** A finished local build of node-llama-cpp (llama/localBuilds/<folder>) made with exactly these CMake options. */
function findLocalBuild(options: Record<string, string>): string | null {
  const dir = path.join(nodeLlamaCpp, 'llama', 'localBuilds');
  if (!existsSync(dir)) return null;
  const release = (JSON.parse(readFileSync(path.join(nodeLlamaCpp, 'llama', 'binariesGithubRelease.json'), 'utf8')) as { release: string })
    .release;
  const wanted = JSON.stringify(Object.entries(options).sort());
  for (const folder of readdirSync(dir)) {
    const metadata = path.join(dir, folder, 'Release', '_nlcBuildMetadata.json');
    if (!existsSync(path.join(dir, folder, 'buildDone.status')) || !existsSync(metadata)) continue;
    const { buildOptions } = JSON.parse(readFileSync(metadata, 'utf8')) as {
      buildOptions: { gpu: string | false; customCmakeOptions: Record<string, string>; llamaCpp: { release: string } };
    };
    if (
      buildOptions.gpu === 'cuda' &&
      buildOptions.llamaCpp.release === release &&
      JSON.stringify(Object.entries(buildOptions.customCmakeOptions).sort()) === wanted
    )
      return folder;
  }
  return null;
}

async function sourceBuildState(stateDir: string, options: Record<string, string>, nvcc: string | null): Promise<SourceBuildState> {
  const folder = findLocalBuild(options);
  if (folder) return { state: 'built', folder: path.relative(KILN_ROOT, path.join(nodeLlamaCpp, 'llama', 'localBuilds', folder)) };
  if (process.env.KILN_GPU_SOURCE_BUILD === 'false') return { state: 'opted-out' };
  if (existsSync(path.join(stateDir, FAILED_MARKER)))
    return { state: 'failed', log: readFileSync(path.join(stateDir, FAILED_MARKER), 'utf8').trim() };
  const missing = [
    nvcc ? null : 'nvcc (the CUDA toolkit)',
    (await which('cmake')) ? null : 'cmake',
    (await which('c++')) ? null : 'a C++ compiler (c++)',
  ];
  const absent = missing.filter((m): m is string => m !== null);
  return absent.length > 0 ? { state: 'no-toolchain', missing: absent } : { state: 'possible' };
}

const quoteEnv = (value: string) => `'${value.replace(/'/g, `'\\''`)}'`;
const envLines = (vars: Record<string, string>) =>
  Object.entries(vars)
    .map(([k, v]) => `${k}=${quoteEnv(v)}\n`)
    .join('');

async function main() {
  const at = process.argv.indexOf('--state-dir');
  const stateDir = at > 0 ? process.argv[at + 1] : undefined;
  if (!stateDir) throw new Error('usage: gpu-install --state-dir DIR');
  const gpus = await listGpus();
  const options = sourceBuildCmakeOptions(gpus, cpuinfoFlags(existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : ''));
  const nvcc = gpus.length > 0 ? await findNvcc() : null;
  const plan = planGpuBuild({
    gpus,
    prebuilts: gpus.length > 0 ? await prebuilts() : [],
    sourceBuild: gpus.length > 0 ? await sourceBuildState(stateDir, options, nvcc) : { state: 'opted-out' },
  });
  const cmakeEnv = Object.fromEntries(Object.entries(options).map(([k, v]) => [`${CMAKE_OPTION_PREFIX}${k}`, v]));
  const programs = plan.backend === 'cuda' ? enginePrograms(gpus) : enginePrograms([]);

  const state: GpuBuildState = { at: new Date().toISOString(), gpus, plan, programs };
  writeFileSync(path.join(stateDir, GPU_BUILD_STATE), `${JSON.stringify(state, null, 2)}\n`);
  if (plan.build === 'source' && !plan.needsBuild) writeFileSync(path.join(stateDir, GPU_BUILD_ENV), envLines(cmakeEnv));
  else rmSync(path.join(stateDir, GPU_BUILD_ENV), { force: true });
  if (plan.needsBuild) writeFileSync(path.join(stateDir, PENDING_ENV), envLines({ ...cmakeEnv, CUDACXX: nvcc! }));
  else rmSync(path.join(stateDir, PENDING_ENV), { force: true });

  const out = (line: string) => process.stderr.write(`  ${line}\n`);
  process.stderr.write(`\x1b[1mkiln\x1b[0m GPU host: ${gpus.length} NVIDIA GPU${gpus.length === 1 ? '' : 's'}\n`);
  for (const gpu of gpus) out(describeGpu(gpu));
  const build =
    plan.build === 'source'
      ? "built from node-llama-cpp's llama.cpp source for this host"
      : plan.build === 'prebuilt'
        ? `prebuilt ${plan.prebuilt}`
        : 'no CUDA build';
  out(`llama.cpp backend: ${plan.backend === 'cuda' ? 'CUDA' : 'CPU'} (${build})`);
  out(`why: ${plan.reason}`);
  if (plan.warning) out(`\x1b[33mwarning: ${plan.warning}\x1b[0m`);
  out("ONNX models run on the CPU: onnxruntime-node's CUDA provider is downloaded from NuGet at install and is not installed offline");
  if (!plan.needsBuild) out(`engine workers: ${programs.join(', ')}`);
  console.log(plan.needsBuild ? 'build' : 'ready');
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
