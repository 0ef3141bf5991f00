/**
 * npm run status: every component of the local stack, up or down, with its pid, uptime, restarts
 * and a health check of its own kind. Services (Temporal, MinIO, Postgres) are found by the port
 * they listen on, whoever started them; Kiln's processes by their supervisor's state
 * (infra/supervisor.ts). Exits 1 when any component is down. `--json` prints the rows as JSON.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import postgres from 'postgres';
import { cpuHost } from '../engines/llama/backend';
import { sourceBuildState } from '../lib/llama-build-state';
import { processAlive, readPidFile } from '../lib/pid-files';
import { stateFileOf } from '../lib/ready';
import { DEFAULT_TEMPORAL_UI_URL } from '../lib/temporal-ui';
import { KILN_ROOT } from './checkout';
import { GPU_BUILD_STATE, type GpuBuildState } from './gpu-install';
import { STATE_FILE, type SupervisorState } from './supervisor-state';

export interface ComponentStatus {
  component: string;
  up: boolean;
  pid: number | null;
  uptimeS: number | null;
  restarts: number | null;
  health: string;
}

/** Seconds since the process started, from /proc (its start time in clock ticks after boot). */
function uptimeOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const startTicks = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
    const bootUptime = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
    return Math.max(0, Math.round(bootUptime - startTicks / 100));
  } catch {
    return null;
  }
}

/** The pid listening on 127.0.0.1:port (ss shows other users' processes only to root). */
async function listenerPid(port: number): Promise<number | null> {
  try {
    const { stdout } = await promisify(execFile)('ss', ['-Hltnp', `sport = :${port}`], { encoding: 'utf8' });
    const m = /pid=(\d+)/.exec(stdout);
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

async function httpStatus(url: string): Promise<string> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(3_000) });
    return `HTTP ${res.status}`;
  } catch (err) {
    return `unreachable (${(err as Error).message})`;
  }
}

async function service(component: string, port: number, probe: () => Promise<{ ok: boolean; health: string }>): Promise<ComponentStatus> {
  const [pid, { ok, health }] = await Promise.all([listenerPid(port), probe().catch((err: Error) => ({ ok: false, health: err.message }))]);
  return { component, up: ok, pid, uptimeS: pid ? uptimeOf(pid) : null, restarts: null, health };
}

async function temporalProbe(address: string) {
  const connection = await Connection.connect({ address, connectTimeout: 2_000 });
  try {
    const info = await connection.workflowService.getSystemInfo({});
    return { ok: true, health: `serving ${address} (server ${info.serverVersion || 'unknown'})` };
  } finally {
    await connection.close();
  }
}

async function postgresProbe(url: string) {
  const sql = postgres(url, { max: 1, connect_timeout: 3, onnotice: () => undefined });
  try {
    const [{ version }] = await sql<{ version: string }[]>`select current_setting('server_version') as version`;
    return { ok: true, health: `accepting queries (PostgreSQL ${version})` };
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/** Kiln's processes of one stack (the development one in .data, a suite lane's in .data/test or .data/test-l<K>). */
async function kilnProcesses(runDir: string, label: string): Promise<ComponentStatus[]> {
  let state: SupervisorState;
  try {
    state = JSON.parse(readFileSync(path.join(runDir, STATE_FILE), 'utf8')) as SupervisorState;
  } catch {
    return [];
  }
  const supervisorUp = processAlive(state.pid);
  const rows: ComponentStatus[] = [
    {
      component: `${label}supervisor`,
      up: supervisorUp,
      pid: supervisorUp ? state.pid : null,
      uptimeS: supervisorUp ? uptimeOf(state.pid) : null,
      restarts: null,
      health: supervisorUp ? `running (state ${path.relative(KILN_ROOT, path.join(runDir, STATE_FILE))})` : 'not running',
    },
  ];
  // A stopped development stack is one DOWN row; a stopped test stack (the usual case) none.
  if (!supervisorUp) return label === '' ? rows : [];
  for (const p of state.programs) {
    const up = p.pid !== null && processAlive(p.pid);
    let health: string;
    if (!up) health = p.state === 'backoff' && p.nextStartAt ? `restarting at ${p.nextStartAt.slice(11, 19)} UTC` : p.state;
    else if (p.name === 'api') health = `${await httpStatus(`${state.apiUrl}/healthz`)} ${state.apiUrl}/healthz`;
    else health = readPidFile(path.join(runDir, 'pids', `${p.name}.ready`)) === p.pid ? 'ready (polling Temporal)' : 'starting';
    const gpu = /^engine-worker-gpu(\d+)$/.exec(p.name)?.[1];
    if (up && gpu !== undefined) health += `, on GPU ${gpu}`;
    if (up) health += engineLlama(path.join(runDir, 'pids', `${p.name}.ready`), p.pid!);
    if (p.lastExit && p.restarts > 0)
      health += `; last exit ${p.lastExit.signal ?? `code ${p.lastExit.code}`} at ${p.lastExit.at.slice(11, 19)}`;
    rows.push({
      component: `${label}${p.name}`,
      up,
      pid: up ? p.pid : null,
      uptimeS: up && p.startedAt ? Math.round((Date.now() - Date.parse(p.startedAt)) / 1000) : null,
      restarts: p.restarts,
      health,
    });
  }
  return rows;
}

/** The llama.cpp backend npm start's GPU check chose (infra/gpu-install.ts); no row on a host without GPUs. */
function gpuBackend(file: string): ComponentStatus[] {
  let state: GpuBuildState;
  try {
    state = JSON.parse(readFileSync(file, 'utf8')) as GpuBuildState;
  } catch {
    return [];
  }
  const { plan, gpus } = state;
  const build = plan.build === 'source' ? 'source build' : plan.build === 'prebuilt' ? `prebuilt ${plan.prebuilt}` : 'no CUDA build';
  const cards = gpus.map((g) => `${g.index}: ${g.name} ${(g.memoryBytes / 2 ** 30).toFixed(0)} GiB sm_${g.sm}`).join('; ');
  const health = `${plan.backend === 'cuda' ? 'CUDA' : 'CPU'}, ${build}, GPU ${cards}${plan.warning ? ` (warning: ${plan.warning})` : ''}`;
  return [{ component: 'llama.cpp', up: true, pid: null, uptimeS: null, restarts: null, health }];
}

/** The engine nodes registered in the stack's database and live, each with its role (KILN_ENGINE_ROLE) and what it holds. */
async function engineNodes(url: string): Promise<ComponentStatus[]> {
  const sql = postgres(url, { max: 1, connect_timeout: 3, onnotice: () => undefined });
  try {
    const rows = await sql<{ id: string; role: string; loaded: unknown[]; age: number }[]>`
      select id, role, loaded, extract(epoch from now() - heartbeat_at)::float as age from nodes order by id`;
    return rows
      .filter((n) => n.age < 15)
      .map((n) => ({
        component: `node:${n.id}`,
        up: true,
        pid: null,
        uptimeS: null,
        restarts: null,
        health: `role ${n.role}, ${n.loaded.length} version(s) loaded, heartbeat ${n.age.toFixed(0)} s ago`,
      }));
  } catch {
    // No database yet, or one from before roles: the processes' rows say enough.
    return [];
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/** Which llama.cpp an engine process runs and on how many threads, as it said when it loaded it (workers/engine-worker.ts). */
function engineLlama(readyFile: string, pid: number): string {
  try {
    const state = JSON.parse(readFileSync(stateFileOf(readyFile, 'llama'), 'utf8')) as { pid: number; binary: string; threads: number };
    if (state.pid !== pid) return '';
    return `, llama.cpp ${state.binary.startsWith('source build') ? 'built for this CPU' : state.binary}, ${state.threads} thread${state.threads === 1 ? '' : 's'}`;
  } catch {
    return '';
  }
}

/** CPU hosts: where llama.cpp's build for this CPU stands (npm start builds it in the background). */
function cpuSourceBuild(): ComponentStatus[] {
  const setting = process.env.KILN_LLAMA_SOURCE_BUILD ?? 'auto';
  if (!cpuHost('auto')) return [];
  const b = sourceBuildState();
  const row = (up: boolean, health: string, pid: number | null = null): ComponentStatus[] => [
    { component: 'llama.cpp build', up, pid, uptimeS: pid ? uptimeOf(pid) : null, restarts: null, health },
  ];
  const log = (file: string) => (file ? ` (log ${file})` : '');
  switch (b.state) {
    case 'built':
      return row(
        true,
        `built for this CPU${b.builtAt ? ` at ${b.builtAt}` : ''}: ${b.dir}${/^(false|0)$/.test(setting) ? ' (unused: KILN_LLAMA_SOURCE_BUILD=false)' : ''}`,
      );
    case 'building':
      return row(true, `building for this CPU in the background since ${b.startedAt.slice(11, 19)} UTC (~6 min)${log(b.log)}`, b.pid);
    case 'failed':
      return row(
        true,
        `FAILED at ${b.at.slice(11, 19)} UTC (exit ${b.exitCode})${log(b.log)}; the prebuilt serves; bash infra/llama-addon-build.sh tries again`,
      );
    case 'absent':
      return row(
        true,
        /^(false|0)$/.test(setting)
          ? 'prebuilt only (KILN_LLAMA_SOURCE_BUILD=false)'
          : 'not built yet: npm start builds it in the background',
      );
  }
}

function formatUptime(s: number | null): string {
  if (s === null) return '-';
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

export async function stackStatus(): Promise<ComponentStatus[]> {
  const temporalAddress = process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233';
  const fullServer = process.env.KILN_TEMPORAL === 'server';
  const data = path.join(KILN_ROOT, '.data');
  const uiUrl = process.env.KILN_TEMPORAL_UI_URL ?? DEFAULT_TEMPORAL_UI_URL;
  const services = await Promise.all([
    service(fullServer ? 'temporal-server' : 'temporal', Number(temporalAddress.split(':').pop()), () => temporalProbe(temporalAddress)),
    service('temporal-ui', Number(new URL(uiUrl).port || 80), async () => {
      const health = await httpStatus(uiUrl);
      return { ok: health === 'HTTP 200', health: `${health} ${uiUrl}` };
    }),
    service('minio', Number(process.env.MINIO_PORT ?? 9000), async () => {
      const health = await httpStatus(`http://127.0.0.1:${process.env.MINIO_PORT ?? 9000}/minio/health/ready`);
      return { ok: health === 'HTTP 200', health: `${health} /minio/health/ready` };
    }),
    service('postgres', 5432, () => postgresProbe(process.env.KILN_STATUS_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres')),
  ]);
  const dev = await kilnProcesses(data, '');
  // The suite's stacks, one a lane (infra/test.sh): .data/test, .data/test-l1, ...
  const lanes = existsSync(data)
    ? readdirSync(data)
        .filter((d) => /^test(-l\d)?$/.test(d))
        .sort()
    : [];
  const test = (await Promise.all(lanes.map((d) => kilnProcesses(path.join(data, d), `${d}:`)))).flat();
  if (dev.length === 0)
    dev.push({ component: 'kiln', up: false, pid: null, uptimeS: null, restarts: null, health: 'not started (npm start)' });
  const nodes = await engineNodes(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/kiln');
  const gpu = gpuBackend(path.join(process.env.KILN_GPU_STATE_DIR ?? data, GPU_BUILD_STATE));
  return [...services, ...(gpu.length > 0 ? gpu : cpuSourceBuild()), ...dev, ...nodes, ...test];
}

async function main() {
  const rows = await stackStatus();
  if (process.argv.includes('--json')) console.log(JSON.stringify(rows, null, 2));
  else {
    const table = [
      ['COMPONENT', 'STATE', 'PID', 'UPTIME', 'RESTARTS', 'HEALTH'],
      ...rows.map((r) => [
        r.component,
        r.up ? 'up' : 'DOWN',
        r.pid === null ? '-' : String(r.pid),
        formatUptime(r.uptimeS),
        r.restarts === null ? '-' : String(r.restarts),
        r.health,
      ]),
    ];
    const widths = table[0].map((_, i) => Math.max(...table.map((row) => row[i].length)));
    for (const row of table) console.log(row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  '));
  }
  process.exit(rows.every((r) => r.up) ? 0 : 1);
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(2);
  });
}
