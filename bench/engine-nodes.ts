/**
 * Engine nodes a benchmark starts beside its stack's own: each an engine worker process with a
 * node id, data folder and environment of its own (what setup handed engines, less the root
 * secrets), optionally pinned to cores with taskset; started and awaited by their ready file.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DATA_DIR } from './lib';

/** What setup wrote for engines (infra/engine-env.ts), over this environment less the root secrets. */
export function engineEnv(): NodeJS.ProcessEnv {
  const handed = Object.fromEntries(
    readFileSync(path.join(DATA_DIR, 'engine.env'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1).replace(/^'(.*)'$/, '$1')]),
  );
  const secrets = [
    'DATABASE_URL',
    'S3_ACCESS_KEY_ID',
    'S3_SECRET_ACCESS_KEY',
    'KILN_URL_SIGNING_KEY',
    'KILN_SECRETS_KEY',
    'KILN_ENGINE_DB_PASSWORD',
  ];
  return { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !secrets.includes(k))), ...handed };
}

export interface BenchNode {
  id: string;
  /** Cores for taskset (absent: not pinned). */
  cores?: string;
  /** Settings of this node's own (KILN_ENGINE_ROLE, KILN_ENGINE_THREADS, KILN_NODE_MEMORY_MB, …). */
  env: Record<string, string>;
}

/** Each started node's temporary folder (its data, snapshots and log), removed when it is stopped. */
const folders = new WeakMap<ChildProcess, string>();

/** Starts an engine node and waits for its ready file; its log and data are in a temporary folder until it is stopped. */
export async function startEngineNode(n: BenchNode): Promise<ChildProcess> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `kiln-${n.id}-`));
  const ready = path.join(dir, 'ready');
  const log = openSync(path.join(dir, 'engine.log'), 'w');
  const command = ['node', '--import', 'tsx', 'workers/engine-worker.ts'];
  const [program, ...args] = n.cores !== undefined ? ['taskset', '-c', n.cores, ...command] : command;
  const child = spawn(program, args, {
    env: { ...engineEnv(), KILN_NODE_ID: n.id, KILN_DATA_DIR: dir, KILN_METRICS_PORT: '0', KILN_READY_FILE: ready, ...n.env },
    stdio: ['ignore', log, log],
  });
  folders.set(child, dir);
  const t0 = Date.now();
  while (!existsSync(ready)) {
    if (child.exitCode !== null) throw new Error(`${n.id} exited with ${child.exitCode}; its log is in ${dir}`);
    if (Date.now() - t0 > 120_000) throw new Error(`${n.id} not ready after 120 s; its log is in ${dir}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return child;
}

export async function stopEngineNode(child: ChildProcess): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
  const dir = folders.get(child);
  if (dir) await rm(dir, { recursive: true, force: true });
}
