/** Kiln processes a test runs beside the suite's own: a second engine node, an API to kill. */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { poll } from './helpers';
import type { NetnsHost } from './netns-hosts';

/**
 * How node runs `entry` (a .ts path from the root, a Kiln process or the CLI): the compiled build
 * where the suite's stack runs it (KILN_CODE=dist, as infra/app.sh sets for npm test), else the
 * sources through tsx. Run from the root.
 */
function nodeArgsFor(entry: string): string[] {
  const compiled = path.join('dist', entry.replace(/\.ts$/, '.js'));
  const root = path.resolve(__dirname, '..');
  if (process.env.KILN_CODE === 'dist' && existsSync(path.join(root, compiled))) return ['--enable-source-maps', compiled];
  return ['--import', 'tsx', entry];
}

/** Runs one of Kiln's CLIs (`cli/kiln.ts`, `cli/admin.ts`) to its end, from the root, as nodeArgsFor runs it: its stdout and stderr. */
export function runCli(entry: string, args: string[], env: NodeJS.ProcessEnv = process.env) {
  return promisify(execFile)('node', [...nodeArgsFor(entry), ...args], { cwd: path.resolve(__dirname, '..'), env });
}

/**
 * Starts `entry` (a Kiln process's TypeScript file) with the suite's environment plus `env`,
 * its log and ready file in a fresh temp dir, and waits until it says it serves (lib/ready.ts);
 * fails with the log's place if it exits first.
 */
export async function startKilnProcess(
  entry: string,
  name: string,
  env: Record<string, string>,
  base: NodeJS.ProcessEnv = process.env,
  /** A command the process runs under, e.g. `ip netns exec <host>` (it must exec, so the child is the process). */
  wrap: string[] = [],
): Promise<ChildProcess> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `kiln-${name}-`));
  const ready = path.join(dir, 'ready');
  const log = openSync(path.join(dir, `${name}.log`), 'w');
  const [command, ...args] = [...wrap, 'node', ...nodeArgsFor(entry)];
  const child = spawn(command, args, {
    cwd: path.resolve(__dirname, '..'),
    env: { ...base, ...env, KILN_READY_FILE: ready },
    stdio: ['ignore', log, log],
  });
  await poll(
    async () => existsSync(ready) || child.exitCode !== null,
    (done) => done,
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}; its log is in ${dir}`);
  return child;
}

/** Names of variables an engine never gets: the suite's root secrets (infra/app.sh withholds them too). */
const ROOT_SECRETS = [
  'DATABASE_URL',
  'S3_ACCESS_KEY_ID',
  'S3_SECRET_ACCESS_KEY',
  'S3_SESSION_TOKEN',
  'KILN_URL_SIGNING_KEY',
  'KILN_SECRETS_KEY',
  'KILN_SECRETS_PREVIOUS_KEYS',
  'KILN_ENGINE_DB_PASSWORD',
];

/** The suite's environment as an engine node gets it: no root secrets, plus what setup wrote for engines. */
export function engineNodeEnv(): NodeJS.ProcessEnv {
  const file = path.join(process.env.KILN_DATA_DIR ?? path.resolve(__dirname, '..', '.data', 'test'), 'engine.env');
  const handed = Object.fromEntries(
    readFileSync(file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1).replace(/^'(.*)'$/, '$1')]),
  );
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !ROOT_SECRETS.includes(name)));
  return { ...env, ...handed };
}

/**
 * A second engine node `nodeId` with its own cache. Its memory budget is smaller than the suite's
 * first node's, so best-fit placement puts new models there. `env` overrides the suite's settings.
 */
export function startEngineNode(nodeId: string, memoryMb = 1500, env: Record<string, string> = {}): Promise<ChildProcess> {
  return startKilnProcess('workers/engine-worker.ts', nodeId, engineNodeSettings(nodeId, memoryMb, env), engineNodeEnv());
}

function engineNodeSettings(nodeId: string, memoryMb: number, env: Record<string, string>): Record<string, string> {
  const dataDir = env.KILN_DATA_DIR ?? mkdtempSync(path.join(os.tmpdir(), `kiln-${nodeId}-data-`));
  return { KILN_NODE_ID: nodeId, KILN_NODE_MEMORY_MB: String(memoryMb), KILN_DATA_DIR: dataDir, KILN_METRICS_PORT: '0', ...env };
}

/**
 * An engine node `nodeId` on network host `host` (test/netns-hosts.ts): the process runs in the
 * host's network namespace and reaches Postgres, Temporal and object storage only through the
 * host set's forwarders on the bridge, as a separate machine would. Traces are not exported.
 */
export function startEngineNodeOnHost(
  host: NetnsHost,
  nodeId: string,
  memoryMb = 1500,
  env: Record<string, string> = {},
): Promise<ChildProcess> {
  const base = engineNodeEnv();
  delete base.OTEL_EXPORTER_OTLP_ENDPOINT;
  const reached = { ...base, ...host.services(base) };
  return startKilnProcess('workers/engine-worker.ts', nodeId, engineNodeSettings(nodeId, memoryMb, env), reached, [
    'ip',
    'netns',
    'exec',
    host.name,
  ]);
}
