/**
 * How llama.cpp is built for this host's CPU from the source node-llama-cpp ships: the CMake
 * options for the x86 instruction sets /proc/cpuinfo lists (never -march=native: native turns on
 * ggml's AMX kernels where the CPU reports AMX, and those die with SIGILL on Q8_0 models on the
 * hosts measured, issue 19), and the per-user cache folder a
 * build lands in, keyed by llama.cpp's tag, node-llama-cpp's version and those options. Shared by
 * infra/llama-tool.sh (llama.cpp's own tools: llama-batched-bench, the batching benchmark's
 * floor, and llama-server, the chat agreement benchmark's), infra/llama-addon-build.sh
 * (node-llama-cpp's addon built the same way) and the engine, which loads that addon where asked
 * to (engines/llama/backend.ts); the GPU source build
 * (infra/gpu-build-plan.ts) gives its CPU part the same options.
 *
 *   node --import tsx lib/llama-cpu-build.ts options   the variant, then one -D option a line
 *   node --import tsx lib/llama-cpu-build.ts dir KIND   the cache folder of KIND (bench, addon)
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** ggml's x86 options and the /proc/cpuinfo flags each needs (AVX512 turns on F, CD, VL, DQ and BW). */
const GGML_X86_OPTIONS: [option: string, flags: string[]][] = [
  ['GGML_SSE42', ['sse4_2']],
  ['GGML_AVX', ['avx']],
  ['GGML_AVX2', ['avx2']],
  ['GGML_FMA', ['fma']],
  ['GGML_F16C', ['f16c']],
  ['GGML_BMI2', ['bmi2']],
  ['GGML_AVX_VNNI', ['avx_vnni']],
  ['GGML_AVX512', ['avx512f', 'avx512cd', 'avx512vl', 'avx512dq', 'avx512bw']],
  ['GGML_AVX512_VBMI', ['avx512vbmi']],
  ['GGML_AVX512_VNNI', ['avx512_vnni']],
  ['GGML_AVX512_BF16', ['avx512_bf16']],
];

export interface CpuBuildPlan {
  /** e.g. cpu-sse4_2-avx-avx2-fma-f16c-bmi2: names the build, and through its hash the cache folder. */
  variant: string;
  /** CMake cache entries, e.g. ['GGML_AVX2', 'ON']. */
  options: [name: string, value: string][];
}

/** The flags of /proc/cpuinfo's first processor (every core of a host lists the same). */
export function cpuinfoFlags(cpuinfo: string): string[] {
  return /^flags\s*:\s*(.*)$/m.exec(cpuinfo)?.[1].trim().split(/\s+/) ?? [];
}

/**
 * Exactly the instruction sets the host has, named one by one, AMX off (the prebuilt instead
 * loads one of several per-CPU-generation variants at run time, GGML_BACKEND_DL). The C/C++ flags
 * cannot carry -mno-amx-* instead: cmake-js sets CMAKE_CXX_FLAGS after ours.
 */
export function cpuBuildPlan(cpuFlags: string[]): CpuBuildPlan {
  const has = new Set(cpuFlags);
  let variant = 'cpu';
  const options: [string, string][] = [['GGML_NATIVE', 'OFF']];
  for (const [option, flags] of GGML_X86_OPTIONS) {
    const on = flags.every((f) => has.has(f));
    options.push([option, on ? 'ON' : 'OFF']);
    if (on) variant += `-${flags[0]}`;
  }
  options.push(['GGML_AMX_TILE', 'OFF'], ['GGML_AMX_INT8', 'OFF'], ['GGML_AMX_BF16', 'OFF']);
  return { variant, options };
}

export type BuildKind = 'bench' | 'addon';

/**
 * Where a build of `kind` lives: the bench under bin/ beside the Go binaries (the folder name it
 * always had), the addon under llama/ (a folder of shared libraries and llama-addon.node).
 */
export function buildDir(cache: string, kind: BuildKind, tag: string, nlcVersion: string, variant: string): string {
  const hash = createHash('sha256').update(variant).digest('hex').slice(0, 12);
  return kind === 'bench'
    ? path.join(cache, 'bin', `llama-cpp-${tag}-nlc${nlcVersion}-${hash}`)
    : path.join(cache, 'llama', `addon-${tag}-nlc${nlcVersion}-${hash}`);
}

/** Same rule as infra/env.sh. */
export function kilnCache(env: NodeJS.ProcessEnv = process.env): string {
  return env.KILN_CACHE ?? path.join(env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'kiln');
}

/** The installed package's folder (its exports name no package.json). */
export function nodeLlamaCppRoot(): string {
  return path.resolve(path.dirname(require.resolve('node-llama-cpp')), '..');
}

/** node-llama-cpp's version and the llama.cpp tag its source bundle holds. */
export function nodeLlamaCppSource(): { nlcVersion: string; tag: string } {
  const root = nodeLlamaCppRoot();
  const nlcVersion = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;
  const tag = (JSON.parse(readFileSync(path.join(root, 'llama', 'llama.cpp.info.json'), 'utf8')) as { tag: string }).tag;
  return { nlcVersion, tag };
}

/** The cache folder of this host's CPU build of `kind`. */
export function hostCpuBuildDir(kind: BuildKind, cpuinfo = readFileSync('/proc/cpuinfo', 'utf8')): string {
  const { nlcVersion, tag } = nodeLlamaCppSource();
  return buildDir(kilnCache(), kind, tag, nlcVersion, cpuBuildPlan(cpuinfoFlags(cpuinfo)).variant);
}

if (require.main === module) {
  const [command, kind] = process.argv.slice(2);
  const plan = cpuBuildPlan(cpuinfoFlags(readFileSync('/proc/cpuinfo', 'utf8')));
  if (command === 'options') {
    console.log([plan.variant, ...plan.options.map(([k, v]) => `-D${k}=${v}`)].join('\n'));
  } else if (command === 'dir' && (kind === 'bench' || kind === 'addon')) {
    console.log(hostCpuBuildDir(kind));
  } else {
    console.error('usage: llama-cpu-build.ts options | dir bench|addon');
    process.exit(2);
  }
}
