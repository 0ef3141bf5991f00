/**
 * Publishes an engine's output chunks to the prediction's stream as they come. The first chunk
 * goes out at once (time to first token); later ones are batched for a few milliseconds so a
 * fast model does not turn every token into a database round trip.
 */
import type { Db } from '../db/client';
import { appendEvents } from '../db/events';

export class OutputStream {
  private pending: string[] = [];
  private timer?: NodeJS.Timeout;
  private writing: Promise<void> = Promise.resolve();
  private sentAny = false;

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
      this.flush();
    } else {
      this.timer ??= setTimeout(() => this.flush(), this.batchMs);
    }
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.length === 0) return;
    const data = this.pending.join('');
    this.pending = [];
    // Writes stay in order; a failed write loses stream chunks, never the prediction's output.
    this.writing = this.writing
      .then(() => appendEvents(this.db, this.predictionId, [{ event: 'output', data }]))
      .catch(this.onError);
  }

  /** Sends what is left and waits until every chunk is written. */
  async close(): Promise<void> {
    this.flush();
    await this.writing;
  }
}
