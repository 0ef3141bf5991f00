/**
 * A TCP proxy a test can cut: a process that reaches a dependency through it sees that
 * dependency go away (connections refused, open ones reset) exactly when the test says, for as
 * long as it says, without touching the dependency that other processes share.
 */
import type { AddressInfo } from 'node:net';
import net from 'node:net';

export interface TcpProxy {
  /** `127.0.0.1:<port>`: what the process under test connects to. */
  address: string;
  /** Resets every open connection and refuses new ones. */
  cut(): Promise<void>;
  /** Accepts and forwards again, on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(target: string): Promise<TcpProxy> {
  const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
  const open = new Set<net.Socket>();
  const track = (socket: net.Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(port, host);
    track(client);
    track(upstream);
    client.pipe(upstream).pipe(client);
    client.once('error', () => upstream.destroy());
    upstream.once('error', () => client.destroy());
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  });
  const listen = (p: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(p, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const socket of open) socket.resetAndDestroy();
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });
  await listen(0);
  const own = (server.address() as AddressInfo).port;
  return {
    address: `127.0.0.1:${own}`,
    cut: stop,
    restore: () => listen(own),
    close: stop,
  };
}
