/**
 * Publishes an engine's output chunks to the prediction's stream as they come. The first chunk
 * goes out at once (time to first token); later ones are batched for up to `batchMs` (KILN_STREAM_BATCH_MS,
 * on a clock all streams share, so that a node's streams are written together)
 * so a fast model does not turn every token into a database round trip (and a read for each SSE
 * reader), and the last goes as the generation ends (close); chunks that come while a
 * write is in flight join the next write instead of queueing writes of their own: a slow
 * database (a busy host) then means bigger writes, never a backlog that the stream falls behind by.
 */
import type { Db } from '../db/client';
import { appendFirstOutput, landedOutput, StaleAttemptError } from '../db/events';
import { outputAppender } from './output-appender';
import { atNextTick } from './stream-clock';

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
  /** Output tokens of the whole text up to the last chunk pushed, if the engine counts them. */
  private tokens?: number;
  /** Takes back the flush due at the clock's next tick, while one is. */
  private cancelTick?: () => void;
  private writing: Promise<void> = Promise.resolve();
  /** A write is under way: what comes meanwhile waits for it, then goes out in one. */
  private inFlight = false;
  private sentAny = false;
  /** The id of the last event this stream wrote. */
  private lastId?: number;
  /** A later attempt writes the stream now: this one's chunks go nowhere. */
  private replaced = false;

  /**
   * `attempt`: the engine attempt writing (undefined from a workflow that does not number them:
   * then the first write takes the next number).
   */
  constructor(
    private db: Db,
    private predictionId: string,
    private onError: (err: Error) => void,
    private attempt?: number,
    private batchMs = 50,
  ) {}

  /** True once a later attempt has taken the stream over. */
  get isReplaced(): boolean {
    return this.replaced;
  }

  /** `tokens`: the output's length in tokens with this chunk (recorded, for an attempt that continues the text). */
  push(chunk: string, tokens?: number): void {
    this.pending.push(chunk);
    this.tokens = tokens;
    if (!this.sentAny) {
      this.sentAny = true;
      this.flush(true);
    } else {
      // At the next tick of a clock every stream shares: the streams of a node due at once go to the
      // database in one write (output-appender.ts).
      this.cancelTick ??= atNextTick(this.batchMs, () => this.flush());
    }
  }

  private flush(first = false): void {
    this.cancelTick?.();
    this.cancelTick = undefined;
    if (this.pending.length === 0 || this.inFlight) return;
    const data = this.pending.join('');
    const tokens = this.tokens;
    this.pending = [];
    this.inFlight = true;
    // Writes stay in order; one that still fails after the retries loses stream chunks, never the prediction's output.
    this.writing = (this.replaced ? Promise.resolve() : this.write(data, tokens, first))
      .catch((err: Error) => {
        if (err instanceof StaleAttemptError) this.replaced = true;
        this.onError(err);
      })
      .finally(() => {
        this.inFlight = false;
        if (this.replaced) this.pending = [];
        // What came during the write goes now if its batch time is up (or nothing else will send it).
        else if (this.pending.length > 0 && this.cancelTick === undefined) this.flush();
      });
  }

  /**
   * One chunk, written once: after a failure, the write is made again only once the database
   * says the failed one did not land (its commit may have gone through unanswered).
   */
  private async write(data: string, tokens: number | undefined, first: boolean): Promise<void> {
    const deadline = Date.now() + WRITE_RETRY_MS;
    let unsure = false;
    for (let delay = RETRY_FIRST_DELAY_MS; ; delay = Math.min(delay * 2, RETRY_MAX_DELAY_MS)) {
      try {
        const landed = unsure ? await landedOutput(this.db, this.predictionId, this.lastId, this.attempt) : undefined;
        if (landed !== undefined) {
          ({ id: this.lastId, attempt: this.attempt } = landed);
        } else if (first) {
          // The first write of an attempt says, if need be, that a failed attempt's output came before it.
          ({ id: this.lastId, attempt: this.attempt } = await appendFirstOutput(this.db, this.predictionId, data, this.attempt, tokens));
        } else {
          this.lastId = await outputAppender(this.db).append(this.predictionId, data, this.attempt!, tokens);
        }
        return;
      } catch (err) {
        if (err instanceof StaleAttemptError) throw err;
        unsure = true;
        if (Date.now() + delay > deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /** Sends what is left and waits until every chunk is written. */
  async close(): Promise<void> {
    this.flush();
    // Each write, once done, starts the next with what came meanwhile.
    while (this.inFlight) {
      await this.writing;
      this.flush();
    }
  }
}
