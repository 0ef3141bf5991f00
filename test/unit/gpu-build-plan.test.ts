/**
 * The llama.cpp build a GPU host's engine uses, from given facts (GPUs, the libraries the loader
 * finds, the architectures a prebuilt has cubins for, the source build's state), and the facts
 * read from node-llama-cpp's real CUDA prebuilt.
 */
import path from 'node:path';
import { readCudaBinary } from '../../infra/cuda-binary';
import { cudaLibrariesNeeded, findLoaderLibs, type PrebuiltCuda, planGpuBuild, sourceBuildCmakeOptions } from '../../infra/gpu-build-plan';
import { cpuinfoFlags } from '../../lib/llama-cpu-build';

const h100 = { index: 0, sm: 90 };
const rtx4090 = { index: 0, sm: 89 };
// What node-llama-cpp 3.22.1's prebuilts hold (read from the files in the last test).
const cuda13 = (missingLibs: string[] = []): PrebuiltCuda => ({
  name: '@node-llama-cpp/linux-x64-cuda',
  missingLibs,
  cubins: [86, 89, 120, 121],
});
const cuda12 = (missingLibs: string[] = []): PrebuiltCuda => ({ name: '@node-llama-cpp/linux-x64-cuda-ext', missingLibs, cubins: [86] });
const noCuda13 = ['libcudart.so.13', 'libcublas.so.13', 'libcublasLt.so.13'];
const noCuda12 = ['libcudart.so.12', 'libcublas.so.12', 'libcublasLt.so.12'];

test('no GPU: CPU, nothing to build', () => {
  const plan = planGpuBuild({ gpus: [], prebuilts: [cuda13()], sourceBuild: { state: 'possible' } });
  expect(plan).toMatchObject({ backend: 'cpu', build: 'none', needsBuild: false });
});

test('a card the prebuilt has cubins for, with its libraries found: the prebuilt', () => {
  const plan = planGpuBuild({ gpus: [rtx4090], prebuilts: [cuda13(), cuda12(noCuda12)], sourceBuild: { state: 'possible' } });
  expect(plan).toMatchObject({ backend: 'cuda', build: 'prebuilt', prebuilt: '@node-llama-cpp/linux-x64-cuda', needsBuild: false });
  expect(plan.warning).toBeUndefined();
});

test('an H100 (sm_90, PTX only in the prebuilt): built from source once, then that build is used', () => {
  const first = planGpuBuild({ gpus: [h100], prebuilts: [cuda13()], sourceBuild: { state: 'possible' } });
  expect(first).toMatchObject({ backend: 'cuda', build: 'source', needsBuild: true });
  expect(first.reason).toMatch(/no cubins for sm_90/);
  const after = planGpuBuild({
    gpus: [h100],
    prebuilts: [cuda13()],
    sourceBuild: { state: 'built', folder: 'localBuilds/linux-x64-cuda-abc' },
  });
  expect(after).toMatchObject({ backend: 'cuda', build: 'source', needsBuild: false });
  expect(after.reason).toMatch(/localBuilds\/linux-x64-cuda-abc/);
});

test('CUDA 13 libraries missing: a source build even for a card with cubins; the CUDA 12 fallback where its libraries are there and it has cubins', () => {
  const missing = planGpuBuild({ gpus: [rtx4090], prebuilts: [cuda13(noCuda13), cuda12(noCuda12)], sourceBuild: { state: 'possible' } });
  expect(missing).toMatchObject({ build: 'source', needsBuild: true });
  expect(missing.reason).toMatch(/libcudart\.so\.13/);
  const ampere = { index: 0, sm: 86 };
  const fallback = planGpuBuild({ gpus: [ampere], prebuilts: [cuda13(noCuda13), cuda12()], sourceBuild: { state: 'possible' } });
  expect(fallback).toMatchObject({ build: 'prebuilt', prebuilt: '@node-llama-cpp/linux-x64-cuda-ext', needsBuild: false });
});

test('two cards: the prebuilt only if it has cubins for both', () => {
  const both = planGpuBuild({ gpus: [rtx4090, { index: 1, sm: 86 }], prebuilts: [cuda13()], sourceBuild: { state: 'possible' } });
  expect(both.build).toBe('prebuilt');
  const mixed = planGpuBuild({ gpus: [rtx4090, { index: 1, sm: 90 }], prebuilts: [cuda13()], sourceBuild: { state: 'possible' } });
  expect(mixed).toMatchObject({ build: 'source', needsBuild: true });
  expect(sourceBuildCmakeOptions([rtx4090, { sm: 90 }, { sm: 89 }], []).CMAKE_CUDA_ARCHITECTURES).toBe('89;90');
});

test('opted out, no toolchain, or a failed build: the prebuilt with a warning where it loads, else the CPU, saying why', () => {
  const optedOut = planGpuBuild({ gpus: [h100], prebuilts: [cuda13()], sourceBuild: { state: 'opted-out' } });
  expect(optedOut).toMatchObject({ backend: 'cuda', build: 'prebuilt', needsBuild: false });
  expect(optedOut.reason).toMatch(/KILN_GPU_SOURCE_BUILD=false/);
  expect(optedOut.warning).toMatch(/PTX compiled by the driver for sm_90/);

  const noNvcc = planGpuBuild({
    gpus: [h100],
    prebuilts: [cuda13(noCuda13)],
    sourceBuild: { state: 'no-toolchain', missing: ['nvcc (the CUDA toolkit)'] },
  });
  expect(noNvcc).toMatchObject({ backend: 'cpu', build: 'none', needsBuild: false });
  expect(noNvcc.reason).toMatch(/no nvcc/);
  expect(noNvcc.warning).toMatch(/runs on the CPU/);

  const failed = planGpuBuild({ gpus: [h100], prebuilts: [cuda13()], sourceBuild: { state: 'failed', log: '.data/logs/gpu-build.log' } });
  expect(failed).toMatchObject({ build: 'prebuilt', needsBuild: false });
  expect(failed.reason).toMatch(/gpu-build\.log/);

  const nothing = planGpuBuild({ gpus: [h100], prebuilts: [], sourceBuild: { state: 'opted-out' } });
  expect(nothing).toMatchObject({ backend: 'cpu' });
  expect(nothing.reason).toMatch(/no CUDA prebuilt/);
});

test("the source build: this CPU's instruction sets named one by one, never native, AMX off even where the CPU has it; CUDA code for the host's cards only", () => {
  // A Sapphire Rapids host (the H100's): AVX-512 and AMX.
  const cpuinfo =
    'processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma f16c bmi2 avx_vnni avx512f avx512cd avx512vl avx512dq avx512bw avx512vbmi avx512_vnni avx512_bf16 amx_tile amx_int8 amx_bf16\n';
  const o = sourceBuildCmakeOptions([h100], cpuinfoFlags(cpuinfo));
  expect(o).toMatchObject({
    GGML_NATIVE: 'OFF',
    GGML_AVX2: 'ON',
    GGML_AVX512: 'ON',
    GGML_AVX512_VNNI: 'ON',
    GGML_AVX512_BF16: 'ON',
    CMAKE_CUDA_ARCHITECTURES: '90',
  });
  expect(o).toMatchObject({ GGML_AMX_TILE: 'OFF', GGML_AMX_INT8: 'OFF', GGML_AMX_BF16: 'OFF' });
  // An AVX2-only CPU: AVX-512 off; AVX-512 needs all five of F, CD, VL, DQ and BW.
  const avx2 = sourceBuildCmakeOptions([h100], ['sse4_2', 'avx', 'avx2', 'fma', 'f16c', 'bmi2', 'avx512f']);
  expect(avx2).toMatchObject({ GGML_AVX2: 'ON', GGML_FMA: 'ON', GGML_AVX512: 'OFF', GGML_AVX_VNNI: 'OFF' });
  expect(cpuinfoFlags('no flags here')).toEqual([]);
});

test('loader libraries: LD_LIBRARY_PATH first, then 64-bit ldconfig entries; absent ones are null', () => {
  const ldconfig = [
    "1234 libs found in cache `/etc/ld.so.cache'",
    '\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12',
    '\tlibcublas.so.13 (libc6) => /usr/lib32/libcublas.so.13',
    '\tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1',
  ].join('\n');
  const files = new Set(['/opt/cuda13/lib/libcudart.so.13']);
  const found = findLoaderLibs(['libcudart.so.13', 'libcublas.so.13', 'libcudart.so.12', 'libcuda.so.1'], {
    ldconfig,
    ldLibraryPath: '/nowhere:/opt/cuda13/lib/',
    exists: (f) => files.has(f),
  });
  expect(found).toEqual({
    'libcudart.so.13': '/opt/cuda13/lib/libcudart.so.13',
    // Only a 32-bit one in the cache: the 64-bit loader cannot use it.
    'libcublas.so.13': null,
    'libcudart.so.12': '/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12',
    'libcuda.so.1': '/lib/x86_64-linux-gnu/libcuda.so.1',
  });
  expect(cudaLibrariesNeeded(['libggml-base.so', 'libcudart.so.13', 'libcublas.so.13', 'libcuda.so.1', 'libc.so.6'])).toEqual([
    'libcudart.so.13',
    'libcublas.so.13',
    'libcuda.so.1',
    'libcublasLt.so.13',
  ]);
});

test("node-llama-cpp's CUDA 13 prebuilt, read from the file: its CUDA libraries, cubins for sm_86/89/120/121 and only PTX for sm_90", async () => {
  const lib = path.join(__dirname, '../../node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda/libggml-cuda.so');
  const info = await readCudaBinary(lib);
  expect(cudaLibrariesNeeded(info.needed)).toEqual(['libcudart.so.13', 'libcublas.so.13', 'libcuda.so.1', 'libcublasLt.so.13']);
  expect(info.cubins).toEqual([86, 89, 120, 121]);
  expect(info.ptxOnly).toEqual(expect.arrayContaining([90]));
  // So on an H100 the plan is a source build, from the facts as read.
  const plan = planGpuBuild({
    gpus: [h100],
    prebuilts: [{ name: 'cuda', missingLibs: [], cubins: info.cubins }],
    sourceBuild: { state: 'possible' },
  });
  expect(plan.needsBuild).toBe(true);
});
