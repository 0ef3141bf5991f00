/**
 * Faults injected into the real processes of the suite's stack: restart its Temporal server or its
 * Postgres cluster (both its own, infra/suite-services.sh), start and kill -9 an API process, kill -9
 * one of the suite's supervised processes.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import { processAlive, readPidFile } from '../lib/pid-files';
import { poll } from './helpers';
import { startKilnProcess } from './processes';

const ROOT = path.resolve(__dirname, '..');
const RUN_DIR = process.env.KILN_RUN_DIR ?? path.join(ROOT, '.data/test');
const FULL_SERVER_PIDFILE = path.join(ROOT, '.data/pids/temporal-server.pid');

function argvOf(pid: number): string[] {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
}

/** Gone, or a zombie its parent has not reaped yet. */
function exited(pid: number): boolean {
  try {
    return /^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}

/**
 * The Temporal server listening on TEMPORAL_ADDRESS's port, whoever started it: the dev server
 * names its port on its command line; the full server (KILN_TEMPORAL=server) has it in its
 * config, so it is found by its pid file.
 */
function temporalServerPid(port: string): number {
  if (process.env.KILN_TEMPORAL === 'server') {
    const pid = Number(readFileSync(FULL_SERVER_PIDFILE, 'utf8').trim());
    if (!processAlive(pid)) throw new Error(`the Temporal server of ${FULL_SERVER_PIDFILE} is not running`);
    return pid;
  }
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let argv: string[];
    try {
      argv = argvOf(Number(entry));
    } catch {
      continue;
    }
    const i = argv.indexOf('--port');
    if (argv.includes('start-dev') && i >= 0 && argv[i + 1] === port) return Number(entry);
  }
  throw new Error(`no Temporal dev server with --port ${port} found in /proc`);
}

async function temporalServing(address: string): Promise<boolean> {
  try {
    const connection = await Connection.connect({ address, connectTimeout: 1_000 });
    try {
      await connection.workflowService.getSystemInfo({});
      return true;
    } finally {
      await connection.close();
    }
  } catch {
    return false;
  }
}

/**
 * Stops the Temporal server (SIGTERM, as an operator would) and starts it again with the same
 * command line; its SQLite file (the full server's Postgres) keeps every workflow. Returns how
 * long Temporal was unreachable.
 */
export async function restartTemporal(): Promise<number> {
  const address = process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233';
  const pid = temporalServerPid(address.split(':').pop()!);
  const argv = argvOf(pid);
  const cwd = readlinkSync(`/proc/${pid}/cwd`);
  const down = Date.now();
  process.kill(pid, 'SIGTERM');
  await poll(
    async () => processAlive(pid),
    (a) => !a,
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  mkdirSync(path.join(RUN_DIR, 'logs'), { recursive: true });
  const log = openSync(path.join(RUN_DIR, 'logs', 'temporal-restarted.log'), 'a');
  const child = spawn(argv[0], argv.slice(1), { cwd, detached: true, stdio: ['ignore', log, log] });
  child.unref();
  // Whoever started it (infra/services.sh) stops it by its pid file: point that at the new one.
  // The dev server's database lies in the .data of the checkout that started it, maybe another worktree's.
  const dbAt = argv.indexOf('--db-filename');
  const dataDirs = [path.join(ROOT, '.data'), ...(dbAt >= 0 ? [path.dirname(path.resolve(cwd, argv[dbAt + 1]))] : [])];
  for (const pidfile of [...dataDirs.map((dir) => path.join(dir, 'pids/temporal.pid')), FULL_SERVER_PIDFILE]) {
    if (existsSync(pidfile) && readFileSync(pidfile, 'utf8').trim() === String(pid)) writeFileSync(pidfile, `${child.pid}\n`);
  }
  await poll(
    () => temporalServing(address),
    (ok) => ok,
    { timeoutMs: 90_000, intervalMs: 250 },
  );
  return Date.now() - down;
}

/**
 * Restarts the Postgres cluster that serves the suite's DATABASE_URL (Debian's pg_ctlcluster):
 * the suite's own (infra/suite-services.sh), never the developer's.
 */
export async function restartPostgres(): Promise<number> {
  const port = new URL(process.env.DATABASE_URL ?? 'postgres://127.0.0.1:5432/').port || '5432';
  let clusters: string;
  try {
    clusters = (await promisify(execFile)('pg_lsclusters', ['--no-header'], { encoding: 'utf8' })).stdout;
  } catch {
    throw new Error('pg_lsclusters is not available: the Postgres chaos test needs a Debian-style cluster (postgresql-common)');
  }
  const line = clusters.split('\n').find((l) => l.split(/\s+/)[2] === port);
  if (!line) throw new Error(`no Postgres cluster on port ${port} in:\n${clusters}`);
  const [version, name] = line.split(/\s+/);
  const started = Date.now();
  // Asynchronously: a blocked event loop would leave this process's keep-alive sockets stale.
  await promisify(execFile)('pg_ctlcluster', ['--skip-systemctl-redirect', version, name, 'restart', '-m', 'fast']);
  return Date.now() - started;
}

/**
 * kill -9 of one of the suite's own processes (`api`, `control-worker`, `engine-worker`): its
 * supervisor (infra/supervisor.ts) starts a new one, with no help from the test. Resolves when the
 * new process says it serves, with both pids and how long the program was away.
 */
export async function killSuiteProcess(name: string): Promise<{ killed: number; restarted: number; downMs: number }> {
  const pidfile = path.join(RUN_DIR, 'pids', `${name}.pid`);
  const ready = path.join(RUN_DIR, 'pids', `${name}.ready`);
  const killed = Number(readFileSync(pidfile, 'utf8').trim());
  if (!processAlive(killed)) throw new Error(`the suite's ${name} (pid ${killed} in ${pidfile}) is not running`);
  const down = Date.now();
  process.kill(killed, 'SIGKILL');
  await poll(
    async () => exited(killed),
    (gone) => gone,
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  const restarted = await poll(
    async () => {
      const pid = readPidFile(pidfile) ?? 0;
      return pid !== killed && pid > 0 && readPidFile(ready) === pid ? pid : 0;
    },
    (pid) => pid > 0,
    { timeoutMs: 120_000, intervalMs: 100 },
  );
  return { killed, restarted, downMs: Date.now() - down };
}

/** An API process of its own on `port`, to be killed without disturbing the suite's API. */
export function startApi(port: number): Promise<ChildProcess> {
  return startKilnProcess('api/index.ts', `api-${port}`, { PORT: String(port) });
}
