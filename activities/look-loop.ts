/**
 * A loop workflow's looks, run inside one long activity: `looks` calls of `look`, `intervalMs`
 * apart. A look that a workflow schedules on its own timer costs a workflow task, an activity's
 * dispatch and their history each time, in Temporal and in the worker: on an idle stack the
 * reconciler's looks every 2 s cost about 7 % of a core that way, where the look itself costs
 * almost nothing. The activity heartbeats every `heartbeatMs` (LOOK_HEARTBEAT_MS unless a test
 * asks otherwise), also while a slow look runs, so that a lost worker's loop is picked up again
 * within its heartbeat timeout; a cancel ends it between two looks. A failed look is logged and
 * the next one is taken as usual; `onLook` returning true ends the loop early (a look that found
 * work for the workflow to do).
 */
import { Context, log } from '@temporalio/activity';

export interface LookLoopOptions {
  intervalMs: number;
  looks: number;
  heartbeatMs?: number;
  /** What the log calls a failed look. */
  name: string;
}

/** How often a loop says it is alive; its workflow's heartbeat timeout is a few of these (workflows/look-loop-activity.ts). */
export const LOOK_HEARTBEAT_MS = 5_000;

export async function lookEvery<T>(look: () => Promise<T>, onLook: (result: T) => boolean | void, o: LookLoopOptions): Promise<void> {
  const ctx = Context.current();
  const beat = setInterval(() => ctx.heartbeat(), o.heartbeatMs ?? LOOK_HEARTBEAT_MS);
  try {
    for (let n = 0; n < o.looks; n++) {
      try {
        if (onLook(await look()) === true) return;
      } catch (err) {
        log.warn(`${o.name} failed`, { error: (err as Error).message });
      }
      ctx.heartbeat();
      await ctx.sleep(o.intervalMs);
    }
  } finally {
    clearInterval(beat);
  }
}
