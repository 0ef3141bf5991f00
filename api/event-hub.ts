/**
 * One LISTEN per API process, fanned out to the streams and waits open on it. A notification only
 * says "prediction X has new events"; each stream reads them from the table itself.
 *
 * Streams rely on it instead of polling, so it must not go deaf: postgres.js re-listens once when
 * its connection closes and gives up if Postgres is still down then. The hub notifies itself every
 * few seconds; when it has heard nothing for two rounds it listens anew, and after every new
 * LISTEN each subscriber looks again (what was notified in between is lost).
 */
import { LRUCache } from 'lru-cache';
import type postgres from 'postgres';
import { EVENTS_CHANNEL, parseNotice } from '../db/events';
import type { Logger } from '../lib/logger';

/** `outputOnly`: the new events are output chunks only. `resync`: LISTEN was down a while, look at everything again. */
export type Wake = (outputOnly: boolean, resync?: boolean) => void;

/** How often the hub checks that it still hears the channel. */
const PROBE_MS = 5_000;
/** The payload of the hub's own check (never a prediction's id, which has no spaces). */
const PROBE = 'probe kiln-event-hub';

export class EventHub {
  private subscribers = new Map<string, Set<Wake>>();
  /** The client LISTEN runs on: a fresh one for each LISTEN, so nothing of a lost one lingers. */
  private listening?: postgres.Sql;
  /** When each prediction last had events other than output (performance.now()), for waits that begin after. */
  private lastNotice = new LRUCache<string, number>({ max: 50_000 });
  /** Each prediction's last notification, numbered across all of them, and how many resyncs there were: see noticeMark. */
  private noticeSeq = new LRUCache<string, number>({ max: 50_000 });
  private notices = 0;
  private resyncs = 0;
  /** When anything last came on the channel, the hub's own probes included (performance.now()). */
  private heardAt = performance.now();
  private prober?: NodeJS.Timeout;
  private probing = false;
  /** Whether a LISTEN has begun before: any later one follows a lost connection. */
  private listenedBefore = false;

  /** `sql`: the pool, for the hub's probes; `listenClient`: makes a client of its own for LISTEN. */
  constructor(
    private sql: postgres.Sql,
    private logger: Logger,
    private listenClient: () => postgres.Sql,
  ) {}

  async start(): Promise<void> {
    await this.listen();
    this.prober = setInterval(() => void this.probe(), PROBE_MS);
    this.prober.unref();
  }

  private async listen(): Promise<void> {
    // Not awaited: ending a lost connection may hang; its LISTEN is dropped with it.
    void this.listening?.end({ timeout: 0 }).catch(() => undefined);
    const client = (this.listening = this.listenClient());
    // Its callback comes at each LISTEN, postgres.js's own again after a lost connection too (even
    // one this call saw fail): every LISTEN but the hub's first may have missed notifications.
    await client.listen(
      EVENTS_CHANNEL,
      (payload) => this.heard(payload),
      () => {
        this.heardAt = performance.now();
        this.logger.debug('listening for prediction events');
        if (this.listenedBefore) this.resync();
        this.listenedBefore = true;
      },
    );
  }

  private heard(payload: string): void {
    this.heardAt = performance.now();
    if (payload === PROBE) return;
    const { predictionId, outputOnly } = parseNotice(payload);
    this.noticeSeq.set(predictionId, ++this.notices);
    if (!outputOnly) this.lastNotice.set(predictionId, performance.now());
    this.subscribers.get(predictionId)?.forEach((wake) => wake(outputOnly));
  }

  /** Every subscriber looks again: notifications may have been lost. */
  private resync(): void {
    this.resyncs += 1;
    for (const set of this.subscribers.values()) set.forEach((wake) => wake(false, true));
  }

  private async probe(): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    try {
      if (performance.now() - this.heardAt > 2 * PROBE_MS + 1_000) {
        this.logger.warn('heard nothing on the events channel, not even its own probe: listening anew');
        await this.listen();
        return;
      }
      await this.sql`select pg_notify(${EVENTS_CHANNEL}, ${PROBE})`;
    } catch (err) {
      this.logger.debug({ err }, 'the events channel check failed; trying again');
    } finally {
      this.probing = false;
    }
  }

  subscribe(predictionId: string, wake: Wake): () => void {
    let set = this.subscribers.get(predictionId);
    if (!set) this.subscribers.set(predictionId, (set = new Set()));
    set.add(wake);
    return () => {
      set.delete(wake);
      if (set.size === 0) this.subscribers.delete(predictionId);
    };
  }

  /**
   * Changes with every notification for the prediction and every resync. Reads that streams share
   * are keyed by it: a stream woken by a notification must not take the result of a read that
   * began before it, which may lack the events the notification announced.
   */
  noticeMark(predictionId: string): string {
    return `${this.resyncs}.${this.noticeSeq.get(predictionId) ?? 0}`;
  }

  /** Whether events other than output came for the prediction at or after `at` (performance.now()). */
  noticedSince(predictionId: string, at: number): boolean {
    return (this.lastNotice.get(predictionId) ?? -Infinity) >= at;
  }

  async stop(): Promise<void> {
    clearInterval(this.prober);
    await this.listening?.end({ timeout: 1 });
  }
}
