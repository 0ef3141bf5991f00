/**
 * Engine hosts that are separate network hosts: network namespaces on one bridge
 * (infra/netns-hosts.sh), reaching the suite's services, which listen on loopback, only through
 * TCP forwarders on the bridge's address. Cutting a host takes its link down; cutting a forwarder
 * is what every host sees when that service goes down. Each command that makes or cuts a host is
 * printed, so the test's log shows them.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { startTcpProxy, type TcpProxy } from './tcp-proxy';

const SCRIPT = path.resolve(__dirname, '..', 'infra', 'netns-hosts.sh');

export interface NetnsHost {
  /** The namespace's name, also its veth's in the root namespace. */
  name: string;
  /** Its own address on the bridge's /24. */
  address: string;
  /** `env`'s service addresses (database, Temporal, object storage) as this host reaches them. */
  services(env: NodeJS.ProcessEnv): Record<string, string>;
}

export interface NetnsHosts {
  hosts: NetnsHost[];
  /** What the hosts reach Postgres, Temporal and object storage through. */
  forwarders: { database: TcpProxy; temporal: TcpProxy; store: TcpProxy };
  /** Every command run so far, as `+ ip ...` lines. */
  commands: string[];
  cut(host: NetnsHost): void;
  restore(host: NetnsHost): void;
  /** Removes the forwarders and everything the script made; safe to call twice. */
  down(): Promise<void>;
}

function hostPort(address: string): string {
  const url = new URL(address.includes('://') ? address : `tcp://${address}`);
  return `${url.hostname}:${url.port}`;
}

function withHost(address: string, to: string): string {
  const [host, port] = to.split(':');
  const url = new URL(address);
  url.hostname = host;
  url.port = port;
  return url.toString().replace(/\/$/, address.endsWith('/') ? '/' : '');
}

export async function upNetnsHosts(count: number, engineEnv: NodeJS.ProcessEnv): Promise<NetnsHosts> {
  const commands: string[] = [];
  const script = (...args: string[]) => {
    const out = execFileSync('bash', [SCRIPT, ...args], { encoding: 'utf8', env: process.env });
    const lines = out.split('\n').filter((l) => l.startsWith('+ '));
    commands.push(...lines);
    if (lines.length > 0) console.log(`infra/netns-hosts.sh ${args.join(' ')}\n${lines.join('\n')}`);
    return out.trim();
  };
  // A run that died before its afterAll may have left hosts behind.
  script('down');
  script('up', String(count));
  const bridge = script('bridge-address');
  const temporalAddress = process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233';
  const storeEndpoint = process.env.S3_ENDPOINT ?? 'http://127.0.0.1:9000';
  const forwarders = {
    database: await startTcpProxy(hostPort(engineEnv.DATABASE_URL!), { host: bridge }),
    temporal: await startTcpProxy(temporalAddress, { host: bridge }),
    store: await startTcpProxy(hostPort(storeEndpoint), { host: bridge, refuseWhileCut: true }),
  };
  const services = (env: NodeJS.ProcessEnv) => ({
    DATABASE_URL: withHost(env.DATABASE_URL!, forwarders.database.address),
    TEMPORAL_ADDRESS: forwarders.temporal.address,
    S3_ENDPOINT: withHost(storeEndpoint, forwarders.store.address),
  });
  const hosts = Array.from({ length: count }, (_, i) => {
    const name = `${process.env.KILN_NETNS_PREFIX ?? `kiln${process.env.KILN_TEST_SLOT ?? '0'}`}-h${i + 1}`;
    return { name, address: script('address', name), services };
  });
  let isDown = false;
  return {
    hosts,
    forwarders,
    commands,
    cut: (host) => void script('cut', host.name),
    restore: (host) => void script('restore', host.name),
    down: async () => {
      if (isDown) return;
      isDown = true;
      await Promise.all(Object.values(forwarders).map((f) => f.close()));
      script('down');
    },
  };
}
