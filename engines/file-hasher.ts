/**
 * sha256 of a file that is still being written, computed on a worker thread: ranges are hashed in
 * the order they are added, read back from the file. On the download's own thread a hash competes
 * with the sockets it reads (about a second per GiB on this kind of CPU); on its own thread it
 * runs on another core while the bytes still arrive.
 */
import { Worker } from 'node:worker_threads';

// Plain JavaScript, evaluated: the thread needs no TypeScript loader, whatever runs the process.
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const { openSync, readSync, closeSync } = require('node:fs');
const { createHash } = require('node:crypto');
const fd = openSync(workerData.path, 'r');
const hash = createHash('sha256');
const buf = Buffer.allocUnsafe(4 * 2 ** 20);
parentPort.on('message', (m) => {
  try {
    if (m.type === 'digest') {
      closeSync(fd);
      parentPort.postMessage({ type: 'digest', hex: hash.digest('hex') });
      return;
    }
    for (let at = m.start; at < m.end; ) {
      const n = readSync(fd, buf, 0, Math.min(buf.length, m.end - at), at);
      if (n === 0) throw new Error('the file ends at ' + at + ', before ' + m.end);
      hash.update(buf.subarray(0, n));
      at += n;
    }
  } catch (err) {
    parentPort.postMessage({ type: 'error', message: err.message });
  }
});
`;

type Reply = { type: 'digest'; hex: string } | { type: 'error'; message: string };

export class FileHasher {
  private readonly thread: Worker;
  private failure: Error | undefined;
  private digestWaiter: { resolve: (hex: string) => void; reject: (err: Error) => void } | undefined;

  constructor(path: string) {
    this.thread = new Worker(THREAD, { eval: true, workerData: { path } });
    this.thread.on('message', (m: Reply) => {
      if (m.type === 'digest') this.digestWaiter?.resolve(m.hex);
      else this.fail(new Error(m.message));
    });
    this.thread.on('error', (err) => this.fail(err));
  }

  /** Hashes bytes [start, end) of the file next, after every range added before. */
  add(start: number, end: number): void {
    if (!this.failure) this.thread.postMessage({ type: 'range', start, end });
  }

  /** The digest of every range added, in order; the thread ends with it. */
  async digest(): Promise<string> {
    if (this.failure) throw this.failure;
    const hex = new Promise<string>((resolve, reject) => (this.digestWaiter = { resolve, reject }));
    this.thread.postMessage({ type: 'digest' });
    try {
      return await hex;
    } finally {
      await this.thread.terminate();
    }
  }

  async close(): Promise<void> {
    await this.thread.terminate();
  }

  private fail(err: Error): void {
    this.failure ??= err;
    this.digestWaiter?.reject(this.failure);
  }
}
