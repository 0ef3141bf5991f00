/**
 * Keeps Kiln's processes alive on one machine (npm start, npm test): runs each named program
 * (`bash infra/run-app.sh NAME`, which execs the process itself), restarts one that exits with
 * exponential backoff, logs every exit and restart, and writes its state for `npm run status`.
 *
 *   supervisor --run-dir DIR NAME...
 *
 * DIR/pids/NAME.pid names each program's current process, DIR/pids/NAME.ready is written by the
 * program when it serves (lib/ready.ts), DIR/logs/NAME.log has its output, DIR/supervisor.json
 * the state. The supervisor announces itself ready (its own KILN_READY_FILE) once every program
 * is; a program that exits before it was ever ready fails the start instead of looping, as a
 * config error would. A program that exits with RESTART_EXIT_CODE (lib/ready.ts) stopped cleanly
 * to be started again, and is, at once. SIGTERM or SIGINT stops the programs (TERM, KILL after 15 s), then it.
 *
 * Production runs the same processes under systemd (infra/systemd/), which does this job there.
 * This one exists for the local stack because it needs no root, no unit files and nothing more
 * to install, knows Kiln's readiness protocol, and runs per checkout (each test slot has its own).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createLogger, type Logger } from '../lib/logger';
import { processAlive, readPidFile } from '../lib/pid-files';
import { announceReady, RESTART_EXIT_CODE, stateFileOf } from '../lib/ready';
import { KILN_ROOT } from './checkout';
import { backoffAfterCrash } from './supervisor-backoff';
import { type ProgramStatus, STATE_FILE, type SupervisorState } from './supervisor-state';

const STOP_GRACE_MS = 15_000;
const READY_POLL_MS = 100;

interface Program {
  status: ProgramStatus;
  child?: ChildProcess;
  startedMs: number;
  failures: number;
  everReady: boolean;
  timer?: NodeJS.Timeout;
}

function parseArgs(argv: string[]) {
  const at = argv.indexOf('--run-dir');
  if (at < 0 || !argv[at + 1]) throw new Error('usage: supervisor --run-dir DIR NAME...');
  const names = argv.filter((_, i) => i !== at && i !== at + 1);
  if (names.length === 0) throw new Error('supervisor: no programs named');
  return { runDir: path.resolve(argv[at + 1]), names };
}

async function waitUntilGone(pids: number[], ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (pids.some(processAlive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  for (const pid of pids.filter(processAlive)) process.kill(pid, 'SIGKILL');
}

/** The programs of one run dir, each started, watched and restarted, and the state file that says so. */
class Supervisor {
  private readonly programs: Map<string, Program>;
  private readonly startedAt = new Date().toISOString();
  private stopping = false;
  private announced = false;

  constructor(
    private readonly runDir: string,
    private readonly names: string[],
    private readonly logger: Logger,
  ) {
    this.programs = new Map(
      names.map((name) => [
        name,
        {
          status: { name, state: 'stopped', pid: null, startedAt: null, readyMs: null, restarts: 0, lastExit: null, nextStartAt: null },
          startedMs: 0,
          failures: 0,
          everReady: false,
        },
      ]),
    );
  }

  pidFile = (name: string) => path.join(this.runDir, 'pids', `${name}.pid`);
  readyFile = (name: string) => path.join(this.runDir, 'pids', `${name}.ready`);

  writeState(): void {
    const state: SupervisorState = {
      pid: process.pid,
      startedAt: this.startedAt,
      updatedAt: new Date().toISOString(),
      apiUrl: `http://${process.env.HOST ?? '127.0.0.1'}:${process.env.PORT ?? '8080'}`,
      programs: [...this.programs.values()].map((p) => p.status),
    };
    const file = path.join(this.runDir, STATE_FILE);
    writeFileSync(`${file}.tmp`, JSON.stringify(state, null, 2));
    renameSync(`${file}.tmp`, file);
  }

  /**
   * Processes left by a supervisor that was killed (or by a stack started before supervision):
   * stopped first, so that two of one program never run side by side from one checkout.
   */
  async stopOrphans(): Promise<void> {
    const orphans = this.names.map((n) => readPidFile(this.pidFile(n))).filter((pid): pid is number => pid !== null && processAlive(pid));
    if (orphans.length === 0) return;
    this.logger.warn({ pids: orphans }, 'stopping processes left by an earlier run');
    for (const pid of orphans) process.kill(pid, 'SIGTERM');
    await waitUntilGone(orphans, STOP_GRACE_MS);
  }

  startAll(): void {
    for (const p of this.programs.values()) this.start(p);
  }

  private start(p: Program): void {
    const name = p.status.name;
    p.timer = undefined;
    rmSync(this.readyFile(name), { force: true });
    const logFile = path.join(this.runDir, 'logs', `${name}.log`);
    if (p.status.restarts === 0 && existsSync(logFile)) renameSync(logFile, `${logFile}.1`);
    const out = openSync(logFile, 'a');
    const child = spawn('bash', [path.join(KILN_ROOT, 'infra/run-app.sh'), name], {
      cwd: KILN_ROOT,
      env: { ...process.env, KILN_READY_FILE: this.readyFile(name) },
      stdio: ['ignore', out, out],
    });
    closeSync(out);
    p.child = child;
    p.startedMs = Date.now();
    Object.assign(p.status, {
      state: 'starting',
      pid: child.pid ?? null,
      startedAt: new Date().toISOString(),
      readyMs: null,
      nextStartAt: null,
    });
    writeFileSync(this.pidFile(name), `${child.pid}\n`);
    this.writeState();
    const watchReady = setInterval(() => {
      if (p.child !== child || p.status.state !== 'starting') return clearInterval(watchReady);
      if (readPidFile(this.readyFile(name)) !== child.pid) return;
      clearInterval(watchReady);
      this.onReady(p, child);
    }, READY_POLL_MS);
    child.once('error', (err) => this.logger.error({ program: name, err }, `${name} could not be started`));
    child.once('exit', (code, signal) => {
      clearInterval(watchReady);
      this.onExit(p, child, logFile, code, signal);
    });
  }

  private onReady(p: Program, child: ChildProcess): void {
    const name = p.status.name;
    p.everReady = true;
    Object.assign(p.status, { state: 'ready', readyMs: Date.now() - p.startedMs });
    this.logger.info({ program: name, childPid: child.pid, readyMs: p.status.readyMs, restarts: p.status.restarts }, `${name} ready`);
    this.writeState();
    if (!this.announced && [...this.programs.values()].every((q) => q.everReady)) {
      this.announced = true;
      announceReady();
    }
  }

  private onExit(p: Program, child: ChildProcess, logFile: string, code: number | null, signal: NodeJS.Signals | null): void {
    const name = p.status.name;
    const ranMs = Date.now() - p.startedMs;
    p.child = undefined;
    p.status.lastExit = { code, signal, at: new Date().toISOString(), ranMs };
    if (this.stopping) {
      Object.assign(p.status, { state: 'stopped', pid: null });
      this.writeState();
      return;
    }
    if (!p.everReady) return this.fail(`${name} exited (code ${code}, signal ${signal}) before it was ready: see ${logFile}`);
    if (code === RESTART_EXIT_CODE) {
      p.status.restarts += 1;
      this.logger.info(
        { program: name, exitedPid: child.pid, ranMs, restart: p.status.restarts },
        `${name} (pid ${child.pid}) asked to be restarted`,
      );
      return this.start(p);
    }
    const { failures, delayMs } = backoffAfterCrash(ranMs, p.failures);
    p.failures = failures;
    p.status.restarts += 1;
    Object.assign(p.status, { state: 'backoff', pid: null, nextStartAt: new Date(Date.now() + delayMs).toISOString() });
    this.logger.warn(
      { program: name, exitedPid: child.pid, code, signal, ranMs, restart: p.status.restarts, delayMs },
      `${name} (pid ${child.pid}) exited (${signal ?? `code ${code}`}) after ${(ranMs / 1000).toFixed(1)} s: restart ${p.status.restarts} in ${delayMs} ms`,
    );
    this.writeState();
    p.timer = setTimeout(() => this.start(p), delayMs);
  }

  private fail(message: string): void {
    this.logger.error(message);
    void this.stopAll(1);
  }

  async stopAll(exitCode: number): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.logger.info('stopping');
    const pids: number[] = [];
    for (const p of this.programs.values()) {
      if (p.timer) clearTimeout(p.timer);
      if (p.child?.pid) {
        pids.push(p.child.pid);
        p.status.state = 'stopping';
        p.child.kill('SIGTERM');
      } else p.status.state = 'stopped';
    }
    this.writeState();
    await waitUntilGone(pids, STOP_GRACE_MS);
    // What the programs said about themselves (lib/ready.ts announceState) goes with them.
    for (const name of this.names)
      for (const file of [this.pidFile(name), this.readyFile(name), stateFileOf(this.readyFile(name), 'llama')])
        rmSync(file, { force: true });
    this.writeState();
    this.logger.info('stopped');
    process.exit(exitCode);
  }
}

async function main() {
  const { runDir, names } = parseArgs(process.argv.slice(2));
  // Its own log is a few lines a day, and each says what happened to a process: never filtered.
  const logger = createLogger('supervisor', 'info');
  const supervisor = new Supervisor(runDir, names, logger);
  await supervisor.stopOrphans();
  process.once('SIGTERM', () => void supervisor.stopAll(0));
  process.once('SIGINT', () => void supervisor.stopAll(0));
  logger.info({ programs: names, runDir }, 'supervisor up');
  supervisor.startAll();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
