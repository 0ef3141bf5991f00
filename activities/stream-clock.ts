/**
 * The clock an engine process's output streams flush on. Streams that ask in the same window are
 * called back by one timer, in one turn of the event loop, so their chunks go to the database in
 * one write (output-appender.ts): with a timer each, two streams that asked a moment apart on
 * either side of a tick would be written apart.
 */
const due = new Map<number, Set<() => void>>();

/** Calls `run` at the next multiple of `periodMs`; the function returned takes it back. */
export function atNextTick(periodMs: number, run: () => void): () => void {
  let callbacks = due.get(periodMs);
  if (!callbacks) {
    const fired = (callbacks = new Set());
    due.set(periodMs, fired);
    setTimeout(
      () => {
        if (due.get(periodMs) === fired) due.delete(periodMs);
        for (const callback of fired) callback();
      },
      periodMs - (Date.now() % Math.max(1, periodMs)),
    );
  }
  const mine = callbacks;
  mine.add(run);
  return () => mine.delete(run);
}
