import { writeFileSync } from 'node:fs';

/**
 * Tells the script that started this process that it is serving: the script sets
 * KILN_READY_FILE and waits for the file, whatever the log level.
 */
export function announceReady(): void {
  const file = process.env.KILN_READY_FILE;
  if (file) writeFileSync(file, `${process.pid}\n`);
}

/**
 * What a process says about itself beside its ready file, for `npm run status`: NAME.ready's
 * folder holds NAME.KIND.json (e.g. engine-worker.llama.json). Nothing is written where the
 * process was not started by a supervisor.
 */
export function announceState(kind: string, state: object): void {
  const file = process.env.KILN_READY_FILE;
  if (file) writeFileSync(stateFileOf(file, kind), `${JSON.stringify({ pid: process.pid, ...state })}\n`);
}

/** The state file of KIND beside a ready file. */
export function stateFileOf(readyFile: string, kind: string): string {
  return `${readyFile.replace(/\.ready$/, '')}.${kind}.json`;
}

/**
 * The exit status of a process that stopped cleanly to be started again at once (EX_TEMPFAIL):
 * its supervisor restarts it without counting a crash or waiting.
 */
export const RESTART_EXIT_CODE = 75;
