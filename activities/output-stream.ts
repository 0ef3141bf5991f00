/**
 * Publishes an engine's output chunks to the prediction's stream as they come. The first chunk
 * goes out at once (time to first token); later ones are batched for a few milliseconds so a
 * fast model does not turn every token into a database round trip.
 */
import type { Db } from '../db/client';
import { appendEvents, appendFirstOutput, landedOutput } from '../db/events';

/**
 * A write that fails (Postgres restarting, a dropped connection) is tried again for this long:
 * a client reading the stream must not lose the chunks generated meanwhile. Long enough for a
 * restart that takes half a minute on a busy host plus a connect attempt made during it, which
 * postgres.js gives up after 30 s.
 */
const WRITE_RETRY_MS = 120_000;
const RETRY_FIRST_DELAY_MS = 100;
const RETRY_MAX_DELAY_MS = 2_000;

export class OutputStream {
  private pending: string[] = [];
  private timer?: NodeJS.Timeout;
  private writing: Promise<void> = Promise.resolve();
  private sentAny = false;
  /** The id of the last event this stream wrote. */
  private lastId?: number;

  constructor(
    private db: Db,
    private predictionId: string,
    private onError: (err: Error) => void,
    private batchMs = 15,
  ) {}

  push(chunk: string): void {
    this.pending.push(chunk);
    if (!this.sentAny) {
      this.sentAny = true;
      this.flush(true);
    } else {
      this.timer ??= setTimeout(() => this.flush(), this.batchMs);
    }
  }

  private flush(first = false): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.length === 0) return;
    const data = this.pending.join('');
    this.pending = [];
    // Writes stay in order; one that still fails after the retries loses stream chunks, never the prediction's output.
    this.writing = this.writing
      .then(() => this.write(data, first))
      .catch(this.onError);
  }

  /**
   * One chunk, written once: after a failure, the write is made again only once the database
   * says the failed one did not land (its commit may have gone through unanswered).
   */
  private async write(data: string, first: boolean): Promise<void> {
    const deadline = Date.now() + WRITE_RETRY_MS;
    let unsure = false;
    for (let delay = RETRY_FIRST_DELAY_MS; ; delay = Math.min(delay * 2, RETRY_MAX_DELAY_MS)) {
      try {
        const landed = unsure ? await landedOutput(this.db, this.predictionId, this.lastId) : undefined;
        // The first write of an attempt says, if need be, that a failed attempt's output came before it.
        this.lastId =
          landed ??
          (first
            ? await appendFirstOutput(this.db, this.predictionId, data)
            : await appendEvents(this.db, this.predictionId, [{ event: 'output', data }]));
        return;
      } catch (err) {
        unsure = true;
        if (Date.now() + delay > deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /** Sends what is left and waits until every chunk is written. */
  async close(): Promise<void> {
    this.flush();
    await this.writing;
  }
}
