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
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createLogger } from '../lib/logger';
import { processAlive, readPidFile } from '../lib/pid-files';
import { announceReady, RESTART_EXIT_CODE, stateFileOf } from '../lib/ready';
import { KILN_ROOT } from './checkout';
import { STATE_FILE, type ProgramStatus, type SupervisorState } from './supervisor-state';

/** A run at least this long counts as a success: the next crash restarts at once again. */
const STABLE_MS = 30_000;
const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 30_000;
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

async function main() {
  const { runDir, names } = parseArgs(process.argv.slice(2));
  // Its own log is a few lines a day, and each says what happened to a process: never filtered.
  const logger = createLogger('supervisor', 'info');
  const pidFile = (name: string) => path.join(runDir, 'pids', `${name}.pid`);
  const readyFile = (name: string) => path.join(runDir, 'pids', `${name}.ready`);
  const startedAt = new Date().toISOString();
  const programs = new Map<string, Program>(
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
  let stopping = false;
  let announced = false;

  const writeState = () => {
    const state: SupervisorState = {
      pid: process.pid,
      startedAt,
      updatedAt: new Date().toISOString(),
      apiUrl: `http://${process.env.HOST ?? '127.0.0.1'}:${process.env.PORT ?? '8080'}`,
      programs: [...programs.values()].map((p) => p.status),
    };
    const file = path.join(runDir, STATE_FILE);
    writeFileSync(`${file}.tmp`, JSON.stringify(state, null, 2));
    renameSync(`${file}.tmp`, file);
  };

  // Processes left by a supervisor that was killed (or by a stack started before supervision):
  // stopped first, so that two of one program never run side by side from one checkout.
  const orphans = names.map((n) => readPidFile(pidFile(n))).filter((pid): pid is number => pid !== null && processAlive(pid));
  if (orphans.length > 0) {
    logger.warn({ pids: orphans }, 'stopping processes left by an earlier run');
    for (const pid of orphans) process.kill(pid, 'SIGTERM');
    await waitUntilGone(orphans, STOP_GRACE_MS);
  }

  const fail = (message: string) => {
    logger.error(message);
    void stopAll(1);
  };

  const start = (p: Program) => {
    const name = p.status.name;
    p.timer = undefined;
    rmSync(readyFile(name), { force: true });
    const logFile = path.join(runDir, 'logs', `${name}.log`);
    if (p.status.restarts === 0 && existsSync(logFile)) renameSync(logFile, `${logFile}.1`);
    const out = openSync(logFile, 'a');
    const child = spawn('bash', [path.join(KILN_ROOT, 'infra/run-app.sh'), name], {
      cwd: KILN_ROOT,
      env: { ...process.env, KILN_READY_FILE: readyFile(name) },
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
    writeFileSync(pidFile(name), `${child.pid}\n`);
    writeState();
    const watchReady = setInterval(() => {
      if (p.child !== child || p.status.state !== 'starting') return clearInterval(watchReady);
      if (readPidFile(readyFile(name)) !== child.pid) return;
      clearInterval(watchReady);
      p.everReady = true;
      Object.assign(p.status, { state: 'ready', readyMs: Date.now() - p.startedMs });
      logger.info({ program: name, childPid: child.pid, readyMs: p.status.readyMs, restarts: p.status.restarts }, `${name} ready`);
      writeState();
      if (!announced && [...programs.values()].every((q) => q.everReady)) {
        announced = true;
        announceReady();
      }
    }, READY_POLL_MS);
    child.once('error', (err) => logger.error({ program: name, err }, `${name} could not be started`));
    child.once('exit', (code, signal) => {
      clearInterval(watchReady);
      const ranMs = Date.now() - p.startedMs;
      p.child = undefined;
      p.status.lastExit = { code, signal, at: new Date().toISOString(), ranMs };
      if (stopping) {
        Object.assign(p.status, { state: 'stopped', pid: null });
        writeState();
        return;
      }
      if (!p.everReady) return fail(`${name} exited (code ${code}, signal ${signal}) before it was ready: see ${logFile}`);
      if (code === RESTART_EXIT_CODE) {
        p.status.restarts += 1;
        logger.info(
          { program: name, exitedPid: child.pid, ranMs, restart: p.status.restarts },
          `${name} (pid ${child.pid}) asked to be restarted`,
        );
        return start(p);
      }
      p.failures = ranMs >= STABLE_MS ? 1 : p.failures + 1;
      // The first crash after a stable run restarts at once: an engine's lost predictions wait on
      // its restart to report them and take them back. Crashes that follow soon back off.
      const delayMs = p.failures === 1 ? 0 : Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** (p.failures - 2));
      p.status.restarts += 1;
      Object.assign(p.status, { state: 'backoff', pid: null, nextStartAt: new Date(Date.now() + delayMs).toISOString() });
      logger.warn(
        { program: name, exitedPid: child.pid, code, signal, ranMs, restart: p.status.restarts, delayMs },
        `${name} (pid ${child.pid}) exited (${signal ?? `code ${code}`}) after ${(ranMs / 1000).toFixed(1)} s: restart ${p.status.restarts} in ${delayMs} ms`,
      );
      writeState();
      p.timer = setTimeout(() => start(p), delayMs);
    });
  };

  const stopAll = async (exitCode: number) => {
    if (stopping) return;
    stopping = true;
    logger.info('stopping');
    const pids: number[] = [];
    for (const p of programs.values()) {
      if (p.timer) clearTimeout(p.timer);
      if (p.child?.pid) {
        pids.push(p.child.pid);
        p.status.state = 'stopping';
        p.child.kill('SIGTERM');
      } else p.status.state = 'stopped';
    }
    writeState();
    await waitUntilGone(pids, STOP_GRACE_MS);
    // What the programs said about themselves (lib/ready.ts announceState) goes with them.
    for (const name of names)
      for (const file of [pidFile(name), readyFile(name), stateFileOf(readyFile(name), 'llama')]) rmSync(file, { force: true });
    writeState();
    logger.info('stopped');
    process.exit(exitCode);
  };
  process.once('SIGTERM', () => void stopAll(0));
  process.once('SIGINT', () => void stopAll(0));

  logger.info({ programs: names, runDir }, 'supervisor up');
  for (const p of programs.values()) start(p);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
