/**
 * The output writes of every stream of an engine process, gathered: what the streams ask for in
 * one turn of the event loop goes to the database in one round trip and one commit
 * (db/events.ts appendOutputs), and what they ask for while that is in flight goes in the next.
 * Streams flush on a shared clock (output-stream.ts), so at 16 streams a node makes one write per
 * batch interval instead of one per stream and token: the CPU the database, the driver and the
 * event loop spent per token is left to the engine.
 */
import type { Db } from '../db/client';
import { appendOutputs } from '../db/events';

interface Waiting {
  chunk: { predictionId: string; data: string; attempt: number; tokens?: number };
  resolve: (id: number) => void;
  reject: (err: Error) => void;
}

class OutputAppender {
  private waiting: Waiting[] = [];
  private scheduled = false;
  private inFlight = false;

  constructor(private db: Db) {}

  /** The chunk's event id, or a StaleAttemptError (thrown) where a later attempt writes the stream now. */
  append(predictionId: string, data: string, attempt: number, tokens?: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ chunk: { predictionId, data, attempt, tokens }, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    const batch = this.waiting;
    this.waiting = [];
    if (batch.length === 0) return;
    this.inFlight = true;
    try {
      const results = await appendOutputs(
        this.db,
        batch.map((w) => w.chunk),
      );
      results.forEach((r, i) => (r instanceof Error ? batch[i].reject(r) : batch[i].resolve(r)));
    } catch (err) {
      // The round trip failed as a whole: each stream decides (output-stream.ts retries, after checking what landed).
      for (const w of batch) w.reject(err as Error);
    } finally {
      this.inFlight = false;
      if (this.waiting.length > 0) this.schedule();
    }
  }
}

const appenders = new WeakMap<Db, OutputAppender>();

/** The appender of a database client: one per engine process. */
export function outputAppender(db: Db): OutputAppender {
  let appender = appenders.get(db);
  if (!appender) appenders.set(db, (appender = new OutputAppender(db)));
  return appender;
}
