/** A webhook receiver for tests: records every request, and can fail or be down at first. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedWebhook {
  headers: http.IncomingHttpHeaders;
  body: string;
  json: any;
  at: number;
}

export interface Receiver {
  url: string;
  port: number;
  received: ReceivedWebhook[];
  /** Requests answered with a 2xx. */
  accepted: ReceivedWebhook[];
  close(): Promise<void>;
}

export async function startReceiver(
  opts: { port?: number; failFirst?: number; failWith?: number; retryAfter?: string } = {},
): Promise<Receiver> {
  const received: ReceivedWebhook[] = [];
  const accepted: ReceivedWebhook[] = [];
  let failuresLeft = opts.failFirst ?? 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const hook = { headers: req.headers, body, json: JSON.parse(body || 'null'), at: Date.now() };
      received.push(hook);
      if (failuresLeft > 0) {
        failuresLeft -= 1;
        if (opts.retryAfter) res.setHeader('retry-after', opts.retryAfter);
        res.writeHead(opts.failWith ?? 500).end('not now');
        return;
      }
      accepted.push(hook);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    accepted,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A port nothing listens on (yet). */
export async function freePort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
