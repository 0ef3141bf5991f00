/**
 * The CPU build of llama.cpp (llama-batched-bench and node-llama-cpp's addon, and the CPU part of
 * the GPU source build): its CMake options from /proc/cpuinfo's flags, the cache folder it lands
 * in, and when the engine asks for it.
 */
import path from 'node:path';
import { sourceBuildSetting } from '../../engines/llama/backend';
import { sourceBuildCmakeOptions } from '../../infra/gpu-build-plan';
import { buildDir, cpuBuildPlan, cpuinfoFlags, kilnCache } from '../../lib/llama-cpu-build';

// The issue-19 host: AVX-512 with VBMI, VNNI and BF16, and AMX, which must stay off.
const avx512Host =
  'sse4_2 avx avx2 fma f16c bmi2 avx512f avx512cd avx512vl avx512dq avx512bw avx512vbmi avx512_vnni avx512_bf16 amx_tile amx_int8 amx_bf16'.split(
    ' ',
  );

test('an AVX-512 host: every instruction set it has, named one by one; never native, never AMX', () => {
  const plan = cpuBuildPlan(avx512Host);
  const o = Object.fromEntries(plan.options);
  expect(o).toMatchObject({
    GGML_NATIVE: 'OFF',
    GGML_SSE42: 'ON',
    GGML_AVX2: 'ON',
    GGML_AVX512: 'ON',
    GGML_AVX512_VBMI: 'ON',
    GGML_AVX512_VNNI: 'ON',
    GGML_AVX512_BF16: 'ON',
  });
  expect(o).toMatchObject({ GGML_AVX_VNNI: 'OFF', GGML_AMX_TILE: 'OFF', GGML_AMX_INT8: 'OFF', GGML_AMX_BF16: 'OFF' });
  expect(plan.variant).toBe('cpu-sse4_2-avx-avx2-fma-f16c-bmi2-avx512f-avx512vbmi-avx512_vnni-avx512_bf16');
});

test('AVX-512 needs all five of F, CD, VL, DQ and BW; an AVX2 host names a different variant', () => {
  const plan = cpuBuildPlan(['sse4_2', 'avx', 'avx2', 'fma', 'f16c', 'bmi2', 'avx512f']);
  expect(Object.fromEntries(plan.options)).toMatchObject({ GGML_AVX2: 'ON', GGML_AVX512: 'OFF', GGML_AVX512_BF16: 'OFF' });
  expect(plan.variant).toBe('cpu-sse4_2-avx-avx2-fma-f16c-bmi2');
  expect(cpuBuildPlan([]).options.filter(([, v]) => v === 'ON')).toEqual([]);
});

test('the GPU source build gives its CPU part the same options', () => {
  const gpu = sourceBuildCmakeOptions([{ sm: 90 }], avx512Host);
  expect(gpu).toMatchObject(Object.fromEntries(cpuBuildPlan(avx512Host).options));
  expect(gpu.CMAKE_CUDA_ARCHITECTURES).toBe('90');
});

test("/proc/cpuinfo: the first processor's flags", () => {
  const cpuinfo = 'processor\t: 0\nflags\t\t: fpu sse4_2 avx2\nbugs\t\t: none\n\nprocessor\t: 1\nflags\t\t: fpu sse4_2 avx2\n';
  expect(cpuinfoFlags(cpuinfo)).toEqual(['fpu', 'sse4_2', 'avx2']);
  expect(cpuinfoFlags('no flags here')).toEqual([]);
});

test('cache folders: keyed by llama.cpp tag, node-llama-cpp version and variant; the bench keeps its old place', () => {
  const bench = buildDir('/c', 'bench', 'v0.5.0', '3.22.1', 'cpu-avx');
  const addon = buildDir('/c', 'addon', 'v0.5.0', '3.22.1', 'cpu-avx');
  // sha256('cpu-avx'), first 12 hex digits, as infra/llama-batched-bench.sh names CUDA builds in bash.
  expect(bench).toBe(path.join('/c', 'bin', 'llama-cpp-v0.5.0-nlc3.22.1-26fdfd90e326'));
  expect(addon).toBe(path.join('/c', 'llama', 'addon-v0.5.0-nlc3.22.1-26fdfd90e326'));
  expect(buildDir('/c', 'addon', 'v0.5.0', '3.22.2', 'cpu-avx')).not.toBe(addon);
  expect(buildDir('/c', 'addon', 'v0.5.0', '3.22.1', 'cpu-avx-avx2')).not.toBe(addon);
  expect(kilnCache({ KILN_CACHE: '/k' })).toBe('/k');
  expect(kilnCache({ XDG_CACHE_HOME: '/x' })).toBe(path.join('/x', 'kiln'));
});

test('KILN_LLAMA_SOURCE_BUILD: auto unless set, the bool spellings, anything else named', () => {
  expect(sourceBuildSetting({})).toBe('auto');
  expect(sourceBuildSetting({ KILN_LLAMA_SOURCE_BUILD: 'auto' })).toBe('auto');
  expect(sourceBuildSetting({ KILN_LLAMA_SOURCE_BUILD: 'true' })).toBe('true');
  expect(sourceBuildSetting({ KILN_LLAMA_SOURCE_BUILD: '1' })).toBe('true');
  expect(sourceBuildSetting({ KILN_LLAMA_SOURCE_BUILD: 'false' })).toBe('false');
  expect(sourceBuildSetting({ KILN_LLAMA_SOURCE_BUILD: '0' })).toBe('false');
  expect(() => sourceBuildSetting({ KILN_LLAMA_SOURCE_BUILD: 'yes' })).toThrow(/KILN_LLAMA_SOURCE_BUILD/);
});
