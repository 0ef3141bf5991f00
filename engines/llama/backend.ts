/**
 * Which llama.cpp the engine runs. On a host that runs on the CPU, the addon
 * infra/llama-addon-build.sh built from node-llama-cpp's own llama.cpp source with this CPU's
 * instruction sets (the options of llama.cpp's own batched bench), when it is in the per-user
 * cache: issue 19 measured node-llama-cpp's prebuilt at about half that build's prompt speed.
 * Otherwise node-llama-cpp's prebuilt (its CPU backend picks one of several per-CPU-generation
 * libraries at run time). KILN_LLAMA_SOURCE_BUILD=false always takes the prebuilt. Nothing is built
 * here; a build that fails to load falls back to the prebuilt. One process runs one of the two for
 * its whole life: their libraries share names.
 *
 * node-llama-cpp looks for local builds only under its own package folder, so the cached build is
 * handed to its Llama class directly, as its getLlama does with a local build it found.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Llama } from 'node-llama-cpp';
import { llamaSourceBuild } from '../../lib/config';
import { cpuBuildPlan, cpuinfoFlags, hostCpuBuildDir, nodeLlamaCppRoot, nodeLlamaCppSource } from '../../lib/llama-cpu-build';

type NodeLlamaCpp = typeof import('node-llama-cpp');

export interface LlamaBackendOptions {
  gpu: 'auto' | 'false' | 'cuda' | 'vulkan' | 'metal';
  threads?: number;
  /** KILN_LLAMA_SOURCE_BUILD (read from the environment where not given). */
  sourceBuild?: SourceBuildSetting;
  /**
   * A folder holding a llama-addon.node built from node-llama-cpp's source, to load instead of
   * choosing a build (infra/gpu-check.sh builds one with CUDA on a host with no prebuilts).
   */
  addonDir?: string;
}

export interface LlamaBackend {
  llama: Llama;
  /** What runs, for the logs: 'prebuilt', or 'source build <folder>'. */
  binary: string;
  /** Why the source build was asked for (KILN_LLAMA_SOURCE_BUILD=true) and not used, where it was. */
  fallback?: string;
  /** Where the prebuilt runs on a CPU host only because nothing was built: how to build it. */
  hint?: string;
  /**
   * Where the prebuilt runs only because the source build is not there yet: the folder it will be
   * in. npm start builds it in the background (infra/llama-addon-build.sh --background); once it
   * is there, a new process runs it (the engine node restarts when idle, workers/engine-node.ts).
   */
  awaitedBuild?: string;
}

export type SourceBuildSetting = 'auto' | 'true' | 'false';

/**
 * The setting as the config parses it, for the benches (which construct LlamaEngine without the
 * config). A malformed value throws, naming the variable.
 */
export function sourceBuildSetting(env: NodeJS.ProcessEnv = process.env): SourceBuildSetting {
  const parsed = llamaSourceBuild.default('auto').safeParse(env.KILN_LLAMA_SOURCE_BUILD);
  if (!parsed.success) throw new Error(`KILN_LLAMA_SOURCE_BUILD: ${parsed.error.issues[0]?.message ?? 'invalid'} (auto, true or false)`);
  return parsed.data;
}

/**
 * A CPU-only source build serves only hosts llama.cpp runs on the CPU: asked for no GPU, or
 * "auto" without an NVIDIA device (GPU hosts have their own build, infra/gpu-install.sh).
 */
export function cpuHost(gpu: LlamaBackendOptions['gpu']): boolean {
  return gpu === 'false' || (gpu === 'auto' && process.platform === 'linux' && process.arch === 'x64' && !existsSync('/dev/nvidiactl'));
}

async function loadSourceBuild(
  nlc: NodeLlamaCpp,
  dir: string,
  bindings: unknown,
  threads?: number,
  gpu: 'cuda' | false = false,
): Promise<Llama> {
  // Llama and its defaults are not among the package's exports; their files are, by path. The
  // same files the package's index imports, so the same module instances.
  const dist = path.join(nodeLlamaCppRoot(), 'dist', 'bindings');
  const { Llama: LlamaClass } = (await import(pathToFileURL(path.join(dist, 'Llama.js')).href)) as {
    Llama: { _create(options: Record<string, unknown>): Promise<Llama>; defaultConsoleLogger: unknown };
  };
  const { defaultLlamaVramPadding, defaultLlamaRamPadding } = (await import(pathToFileURL(path.join(dist, 'getLlama.js')).href)) as Record<
    string,
    unknown
  >;
  const { nlcVersion, tag } = nodeLlamaCppSource();
  if (typeof LlamaClass?._create !== 'function') throw new Error(`node-llama-cpp ${nlcVersion} has no Llama._create`);
  const bindingPath = path.join(dir, 'llama-addon.node');
  const plan = cpuBuildPlan(cpuinfoFlags(readFileSync('/proc/cpuinfo', 'utf8')));
  return LlamaClass._create({
    bindings,
    bindingPath,
    buildType: 'localBuild',
    buildMetadata: {
      buildOptions: {
        customCmakeOptions: Object.fromEntries(plan.options),
        platform: 'linux',
        arch: 'x64',
        gpu,
        llamaCpp: { repo: 'ggml-org/llama.cpp', release: tag },
      },
    },
    logLevel: nlc.LlamaLogLevel.error,
    logger: LlamaClass.defaultConsoleLogger,
    maxThreads: threads,
    vramPadding: defaultLlamaVramPadding,
    ramPadding: defaultLlamaRamPadding,
    debug: false,
    numa: false,
    tempDir: false,
  });
}

/**
 * How llama.cpp's OpenMP threads wait (the source builds use OpenMP; the prebuilt does not): set
 * before its libraries load, where the operator has not. node-llama-cpp decodes on whichever libuv
 * pool thread is free, and each leads an OpenMP team of its own, so libgomp soon manages more
 * threads than there are CPUs; it then spins only 100 times at each of a decode's barriers before
 * sleeping, and on two cores a token took ~20 % longer than in llama.cpp's own tools (issue 16/19:
 * 46.5 against 56.3 tokens/s on the speculative bench's F32 model). ACTIVE raises that spin to
 * 1,000; GOMP_SPINCOUNT keeps an idle team's wait at libgomp's default (~3 ms, where not
 * oversubscribed) instead of ACTIVE's minutes of spinning on an idle engine.
 */
export function openMpWaitDefaults(env: NodeJS.ProcessEnv = process.env): void {
  env.OMP_WAIT_POLICY ??= 'ACTIVE';
  env.GOMP_SPINCOUNT ??= '300000';
}

export async function loadLlamaBackend(nlc: NodeLlamaCpp, o: LlamaBackendOptions): Promise<LlamaBackend> {
  openMpWaitDefaults();
  const prebuilt = () =>
    nlc.getLlama({
      gpu: o.gpu === 'false' ? false : o.gpu,
      build: 'never',
      skipDownload: true,
      usePrebuiltBinaries: true,
      progressLogs: false,
      maxThreads: o.threads,
      logLevel: nlc.LlamaLogLevel.error,
    });
  if (o.addonDir) {
    const bindings = createRequire(__filename)(path.join(o.addonDir, 'llama-addon.node'));
    return {
      llama: await loadSourceBuild(nlc, o.addonDir, bindings, o.threads, o.gpu === 'false' ? false : 'cuda'),
      binary: `source build ${o.addonDir}`,
    };
  }
  const setting = o.sourceBuild ?? sourceBuildSetting();
  if (setting === 'false') return { llama: await prebuilt(), binary: 'prebuilt' };
  // Only an explicit request hears why it was not honoured; auto just takes what there is.
  if (!cpuHost(o.gpu))
    return {
      llama: await prebuilt(),
      binary: 'prebuilt',
      ...(setting === 'true' && { fallback: 'a GPU host: the CPU source build is for CPU hosts' }),
    };
  const dir = hostCpuBuildDir('addon');
  if (!existsSync(path.join(dir, 'llama-addon.node'))) {
    const build = `no source build at ${dir} yet (npm start builds it in the background; bash infra/llama-addon-build.sh builds it now)`;
    return {
      llama: await prebuilt(),
      binary: 'prebuilt',
      awaitedBuild: dir,
      ...(setting === 'true' ? { fallback: build } : { hint: build }),
    };
  }
  let bindings: unknown;
  try {
    bindings = createRequire(__filename)(path.join(dir, 'llama-addon.node'));
  } catch (err) {
    // dlopen failed as a whole (a missing library, a CPU it was not built for): nothing of it stays loaded.
    return { llama: await prebuilt(), binary: 'prebuilt', fallback: `the source build at ${dir} does not load: ${(err as Error).message}` };
  }
  // Past this point its libraries are in the process, and the prebuilt's share their names: an
  // error is reported, not hidden behind a fallback that would mix the two.
  return { llama: await loadSourceBuild(nlc, dir, bindings, o.threads), binary: `source build ${dir}` };
}
