/**
 * A TCP proxy a test can cut: a process that reaches a dependency through it sees that
 * dependency go away (connections refused, open ones reset) exactly when the test says, for as
 * long as it says, without touching the dependency that other processes share.
 */
import type { AddressInfo } from 'node:net';
import net from 'node:net';

export interface TcpProxy {
  /** `<host>:<port>`: what the process under test connects to. */
  address: string;
  /** Bytes sent from the dependency to the process under test so far. */
  bytesDown(): number;
  /** Bytes sent from the process under test to the dependency so far. */
  bytesUp(): number;
  /** Connections refused while cut (`refuseWhileCut`): the process under test tried again. */
  refused(): number;
  /** Resets every open connection and refuses new ones. */
  cut(): Promise<void>;
  /** Accepts and forwards again, on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

export interface TcpProxyOptions {
  /** The address it listens on (default 127.0.0.1): a bridge's, for processes in network namespaces. */
  host?: string;
  /**
   * While cut, keep listening and reset each new connection at once (and count it) instead of
   * closing the listener: the same to the process under test (a dependency that is down), but
   * the test sees each try to reconnect.
   */
  refuseWhileCut?: boolean;
}

export async function startTcpProxy(target: string, opts: TcpProxyOptions = {}): Promise<TcpProxy> {
  const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
  const listenHost = opts.host ?? '127.0.0.1';
  const open = new Set<net.Socket>();
  let down = 0;
  let up = 0;
  let refused = 0;
  let cut = false;
  const track = (socket: net.Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  };
  const server = net.createServer((client) => {
    if (cut) {
      refused += 1;
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(port, host);
    track(client);
    track(upstream);
    upstream.on('data', (chunk: Buffer) => (down += chunk.length));
    client.on('data', (chunk: Buffer) => (up += chunk.length));
    client.pipe(upstream).pipe(client);
    client.once('error', () => upstream.destroy());
    upstream.once('error', () => client.destroy());
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  });
  const listen = (p: number) =>
    new Promise<void>((resolve, reject) => {
      if (server.listening) return resolve();
      server.once('error', reject);
      server.listen(p, listenHost, () => {
        server.off('error', reject);
        resolve();
      });
    });
  const close = () =>
    new Promise<void>((resolve) => {
      for (const socket of open) socket.resetAndDestroy();
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });
  await listen(0);
  const own = (server.address() as AddressInfo).port;
  return {
    address: `${listenHost}:${own}`,
    bytesDown: () => down,
    bytesUp: () => up,
    refused: () => refused,
    cut: async () => {
      cut = true;
      if (!opts.refuseWhileCut) return close();
      for (const socket of open) socket.resetAndDestroy();
    },
    restore: async () => {
      cut = false;
      await listen(own);
    },
    close: () => {
      cut = true;
      return close();
    },
  };
}
