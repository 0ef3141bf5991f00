/**
 * An S3 endpoint for one engine node: a pass-through to the suite's MinIO that holds the
 * download of chosen objects part-way until the test releases it, so a warm-up can be caught in
 * the middle of its download on any machine. Requests keep their Host header, so MinIO checks
 * the node's signatures against the address the node signed for.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StallingStorage {
  endpoint: string;
  /** Paths of the downloads held so far. */
  held: string[];
  /** Lets every held download finish, and every later one through at once. */
  release(): void;
  close(): Promise<void>;
}

export async function startStallingStorage(
  upstream: string,
  holds: (path: string) => boolean,
  bytesBeforeHold = 4096,
): Promise<StallingStorage> {
  let released = false;
  const waiting: Array<() => void> = [];
  const held: string[] = [];
  const server = http.createServer((req, res) => {
    res.on('error', () => undefined);
    const forward = http.request(new URL(req.url ?? '/', upstream), { method: req.method, headers: req.headers }, (up) => {
      const hold = !released && req.method === 'GET' && (up.statusCode === 200 || up.statusCode === 206) && holds(req.url ?? '');
      if (!hold) {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
        return;
      }
      const chunks: Buffer[] = [];
      up.on('data', (c: Buffer) => chunks.push(c));
      up.on('end', () => {
        const body = Buffer.concat(chunks);
        res.writeHead(up.statusCode ?? 502, up.headers);
        res.write(body.subarray(0, bytesBeforeHold));
        held.push(req.url ?? '');
        waiting.push(() => res.end(body.subarray(bytesBeforeHold)));
      });
    });
    forward.on('error', () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    held,
    release() {
      released = true;
      for (const finish of waiting.splice(0)) finish();
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
