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

/** Reads and hashes in a worker thread: the source of `sha256OfFile`'s loop, run there. */
const HASH_IN_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const { createReadStream } = require('node:fs');
(async () => {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(workerData, { highWaterMark: 4 * 2 ** 20 })) hash.update(chunk);
  parentPort.postMessage(hash.digest('hex'));
})().catch((err) => parentPort.postMessage({ error: String(err && err.message) }));
`;

/**
 * A file's sha256 (hex), read and hashed on a worker thread: tens of MiB hashed on the main
 * thread would hold up every other request's tokens for as long.
 */
export function sha256OfFileOffThread(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(HASH_IN_WORKER, { eval: true, workerData: file });
    worker.once('message', (answer: string | { error: string }) => {
      if (typeof answer === 'string') resolve(answer);
      else reject(new Error(`hashing ${file}: ${answer.error}`));
      void worker.terminate();
    });
    worker.once('error', reject);
  });
}
