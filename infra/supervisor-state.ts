/** What infra/supervisor.ts writes to RUN_DIR/supervisor.json, and npm run status reads. */

export type ProgramState = 'starting' | 'ready' | 'backoff' | 'stopping' | 'stopped';

/** One program as supervisor.json shows it. */
export interface ProgramStatus {
  name: string;
  state: ProgramState;
  pid: number | null;
  startedAt: string | null;
  readyMs: number | null;
  restarts: number;
  lastExit: { code: number | null; signal: string | null; at: string; ranMs: number } | null;
  nextStartAt: string | null;
}

export interface SupervisorState {
  pid: number;
  startedAt: string;
  updatedAt: string;
  apiUrl: string;
  programs: ProgramStatus[];
}

export const STATE_FILE = 'supervisor.json';
