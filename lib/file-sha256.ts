import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { Worker } from 'node:worker_threads';

/** A file's sha256 (hex), read in 4 MiB pieces; `onBytes` hears how much has been read so far. */
export async function sha256OfFile(file: string, onBytes?: (done: number) => void): Promise<string> {
  const hash = createHash('sha256');
  let done = 0;
  for await (const chunk of createReadStream(file, { highWaterMark: 4 * 2 ** 20 })) {
    hash.update(chunk as Buffer);
    done += (chunk as Buffer).length;
    onBytes?.(done);
  }
  return hash.digest('hex');
}

/**
 * One worker thread hashes every file asked of it, one after another: starting a thread per file
 * costs tens of milliseconds (hundreds on a busy machine), far more than hashing the few MiB of a
 * KV checkpoint, and a generation's next checkpoint waits for its last one to be recorded.
 */
const HASH_IN_WORKER = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const { createReadStream } = require('node:fs');
parentPort.on('message', async ({ id, file }) => {
  try {
    const hash = createHash('sha256');
    for await (const chunk of createReadStream(file, { highWaterMark: 4 * 2 ** 20 })) hash.update(chunk);
    parentPort.postMessage({ id, sha256: hash.digest('hex') });
  } catch (err) {
    parentPort.postMessage({ id, error: String(err && err.message) });
  }
});
`;

type HashAnswer = { id: number; sha256: string } | { id: number; error: string };

/** The hashing thread, started at the first request; it keeps no process alive while nothing waits on it. */
class HashWorker {
  private worker: Worker | undefined;
  private nextId = 0;
  private readonly waiting = new Map<number, { file: string; resolve: (sha256: string) => void; reject: (err: Error) => void }>();

  hash(file: string): Promise<string> {
    const worker = this.started();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { file, resolve, reject });
      worker.ref();
      worker.postMessage({ id, file });
    });
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(HASH_IN_WORKER, { eval: true });
    worker.on('message', (answer: HashAnswer) => {
      const waiter = this.waiting.get(answer.id);
      this.waiting.delete(answer.id);
      if (this.waiting.size === 0) worker.unref();
      if (!waiter) return;
      if ('sha256' in answer) waiter.resolve(answer.sha256);
      else waiter.reject(new Error(`hashing ${waiter.file}: ${answer.error}`));
    });
    // A thread that died fails what it held; the next request starts another.
    const lost = (err: Error) => {
      if (this.worker === worker) this.worker = undefined;
      for (const waiter of this.waiting.values()) waiter.reject(err);
      this.waiting.clear();
    };
    worker.on('error', lost);
    worker.on('exit', (code) => lost(new Error(`the hashing thread exited (code ${code})`)));
    this.worker = worker;
    return worker;
  }
}

const hashWorker = new HashWorker();

/**
 * A file's sha256 (hex), read and hashed on a worker thread: tens of MiB hashed on the main
 * thread would hold up every other request's tokens for as long.
 */
export function sha256OfFileOffThread(file: string): Promise<string> {
  return hashWorker.hash(file);
}
