/**
 * One ONNX Runtime session on a worker thread of its own. onnxruntime-node's `session.run` is
 * synchronous in its binding (the promise only defers the call with setImmediate), so an ISNet
 * run of a few seconds on the engine's thread would stall everything else there: the 100 ms
 * start announcement, heartbeats (and with them cancellation), other predictions' streams. On
 * its own thread the run takes its cores and the engine's event loop stays free.
 *
 * The thread also turns the 1024×1024 RGB square into ISNet's planar float input and the mask
 * into 8-bit alpha: two loops over a million pixels each, kept off the engine's thread as well.
 */
import { Worker } from 'node:worker_threads';

// Plain JavaScript, evaluated: the thread needs no TypeScript loader, whatever runs the process.
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const ort = require(workerData.ortPath);
let session;

/** (v - 128) / 256, planar: interleaved RGB bytes in, ISNet's float32 input out. */
function toInput(square, size) {
  const plane = size * size;
  const input = new Float32Array(3 * plane);
  for (let i = 0, p = 0; i < plane; i += 1, p += 3) {
    input[i] = (square[p] - 128) / 256;
    input[plane + i] = (square[p + 1] - 128) / 256;
    input[2 * plane + i] = (square[p + 2] - 128) / 256;
  }
  return input;
}

/** The mask's 0..1 floats as 8-bit alpha. */
function toAlpha(mask) {
  const alpha = new Uint8Array(mask.length);
  for (let i = 0; i < mask.length; i += 1) {
    const v = mask[i];
    alpha[i] = v >= 1 ? 255 : v > 0 ? Math.round(v * 255) : 0;
  }
  return alpha;
}

async function handle(m) {
  if (m.type === 'create') {
    session = await ort.InferenceSession.create(m.modelPath, m.options);
    const inputMetadata = session.inputMetadata.map((d) => ({ name: d.name, isTensor: d.isTensor, type: d.type, shape: d.shape ? [...d.shape] : [] }));
    return { signature: { inputNames: [...session.inputNames], outputNames: [...session.outputNames], inputMetadata } };
  }
  if (m.type === 'run') {
    const feeds = { [m.input]: new ort.Tensor('float32', toInput(m.square, m.size), [1, 3, m.size, m.size]) };
    const results = await session.run(feeds, [m.output]);
    const output = results[m.output];
    try {
      return { alpha: toAlpha(output.data) };
    } finally {
      output.dispose();
    }
  }
  if (m.type === 'release') {
    const s = session;
    session = undefined;
    if (s) await s.release();
    return {};
  }
  throw new Error('unknown request ' + m.type);
}

parentPort.on('message', (m) => {
  handle(m).then(
    (reply) => parentPort.postMessage({ id: m.id, ok: true, ...reply }, reply.alpha ? [reply.alpha.buffer] : []),
    (err) => parentPort.postMessage({ id: m.id, ok: false, message: err && err.message ? err.message : String(err) }),
  );
});
`;

/** What the session says of its inputs and outputs, as plain data. */
export interface SessionSignature {
  inputNames: string[];
  outputNames: string[];
  inputMetadata: Array<{ name: string; isTensor: boolean; type?: string; shape: Array<number | string> }>;
}

type Reply = { id: number; ok: true; signature?: SessionSignature; alpha?: Uint8Array } | { id: number; ok: false; message: string };

export class OnnxSessionThread {
  private readonly thread: Worker;
  private nextId = 0;
  private readonly pending = new Map<number, { resolve: (r: Reply & { ok: true }) => void; reject: (err: Error) => void }>();
  private failure: Error | undefined;

  private constructor() {
    this.thread = new Worker(THREAD, { eval: true, workerData: { ortPath: require.resolve('onnxruntime-node') } });
    this.thread.on('message', (m: Reply) => {
      const waiter = this.pending.get(m.id);
      if (!waiter) return;
      this.pending.delete(m.id);
      if (m.ok) waiter.resolve(m);
      else waiter.reject(new Error(m.message));
    });
    this.thread.on('error', (err) => this.fail(err));
    this.thread.on('exit', (code) => this.fail(new Error(`the ONNX Runtime thread exited (code ${code})`)));
  }

  /** A thread holding a new session of `modelPath`; the thread ends if the session cannot be made. */
  static async create(modelPath: string, options: object): Promise<{ thread: OnnxSessionThread; signature: SessionSignature }> {
    const thread = new OnnxSessionThread();
    try {
      const reply = await thread.request({ type: 'create', modelPath, options });
      return { thread, signature: reply.signature! };
    } catch (err) {
      await thread.close();
      throw err;
    }
  }

  /** The alpha mask (size×size bytes) for an interleaved RGB square of size×size. */
  async mask(square: Uint8Array, size: number, input: string, output: string): Promise<Buffer> {
    const reply = await this.request({ type: 'run', square, size, input, output });
    const alpha = reply.alpha!;
    return Buffer.from(alpha.buffer, alpha.byteOffset, alpha.byteLength);
  }

  /** Releases the session and ends the thread. */
  async close(): Promise<void> {
    if (!this.failure) await this.request({ type: 'release' }).catch(() => undefined);
    this.failure ??= new Error('the ONNX Runtime session was released');
    await this.thread.terminate();
  }

  private request(message: Record<string, unknown>): Promise<Reply & { ok: true }> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.thread.postMessage({ ...message, id });
    });
  }

  private fail(err: Error): void {
    this.failure ??= err;
    for (const waiter of this.pending.values()) waiter.reject(this.failure);
    this.pending.clear();
  }
}
