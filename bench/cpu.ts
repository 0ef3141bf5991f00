/** Where the stack's CPU goes, read from /proc: by process of the stack, and for the whole machine. */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { DATA_DIR } from './lib';

const TICKS = 100; // clock ticks per second on Linux (getconf CLK_TCK)

/**
 * The stack's database (from DATABASE_URL): only Postgres backends serving it are Kiln's; the
 * server's own processes (WAL writer, checkpointer) and other databases' backends are counted
 * apart, as `postgres (others)`, since other checkouts may share the server.
 */
const DATABASE = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/kiln').pathname.slice(1);

/** CPU seconds used so far by each process of the stack, by pid, with its component; `extra` names more pids. */
export function cpuByProcess(extra: Map<number, string> = new Map()): Map<number, { component: string; seconds: number }> {
  const pidOf = (name: string) => {
    try {
      return Number(readFileSync(path.join(DATA_DIR, 'pids', `${name}.pid`), 'utf8').trim());
    } catch {
      return undefined;
    }
  };
  const known = new Map<number, string>(extra);
  for (const name of ['api', 'control-worker', 'engine-worker']) {
    const pid = pidOf(name);
    if (pid) known.set(pid, name);
  }
  const out = new Map<number, { component: string; seconds: number }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    let stat: string;
    let cmd: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const seconds = (Number(fields[11]) + Number(fields[12])) / TICKS; // utime + stime
    let component = known.get(pid);
    if (!component) {
      if (pid === process.pid) component = 'load generator';
      else if (/temporal server start-dev|temporal-server /.test(cmd)) component = 'temporal';
      else if (/^postgres/.test(cmd) || /\/postgres /.test(cmd)) {
        // A backend's title is `postgres: [<cluster>: ]<user> <database> <client> <state>` (Debian names the cluster, e.g. 15/main).
        const db = /^postgres: (?:\S+: )?\S+ (\S+) (?:\S+\(\d+\)|\[local\])/.exec(cmd)?.[1];
        component = db === DATABASE ? 'postgres' : 'postgres (others)';
      } else if (/\/minio server /.test(cmd)) component = 'minio';
    }
    if (component) out.set(pid, { component, seconds });
  }
  return out;
}

/** CPU seconds each component used between two readings (processes that exited meanwhile are missed). */
export function cpuBetween(before: ReturnType<typeof cpuByProcess>, after: ReturnType<typeof cpuByProcess>): Record<string, number> {
  const totals: Record<string, number> = {
    api: 0,
    'control-worker': 0,
    'engine-worker': 0,
    temporal: 0,
    postgres: 0,
    minio: 0,
    'load generator': 0,
  };
  for (const [pid, a] of after) totals[a.component] = (totals[a.component] ?? 0) + a.seconds - (before.get(pid)?.seconds ?? 0);
  return totals;
}

/** The machine's busy and total CPU time so far (all cores), from /proc/stat. */
export function machineCpu(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  const idle = fields[3] + fields[4]; // idle + iowait
  return { busy: total - idle, total };
}

/** Share of all cores that was busy between two readings. */
export const busyShare = (a: ReturnType<typeof machineCpu>, b: ReturnType<typeof machineCpu>) => (b.busy - a.busy) / (b.total - a.total);
