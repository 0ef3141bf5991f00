/**
 * One LISTEN per API process, fanned out to the streams open on it. A notification only says
 * "prediction X has new events"; each stream reads them from the table itself.
 */
import { LRUCache } from 'lru-cache';
import type postgres from 'postgres';
import { EVENTS_CHANNEL, parseNotice } from '../db/events';
import type { Logger } from '../lib/logger';

export class EventHub {
  private subscribers = new Map<string, Set<(outputOnly: boolean) => void>>();
  private listener?: { unlisten: () => Promise<void> };
  /** When each prediction last had events other than output (performance.now()), for waits that begin after. */
  private lastNotice = new LRUCache<string, number>({ max: 50_000 });

  constructor(
    private sql: postgres.Sql,
    private logger: Logger,
  ) {}

  async start(): Promise<void> {
    this.listener = await this.sql.listen(
      EVENTS_CHANNEL,
      (payload) => {
        const { predictionId, outputOnly } = parseNotice(payload);
        if (!outputOnly) this.lastNotice.set(predictionId, performance.now());
        this.subscribers.get(predictionId)?.forEach((wake) => wake(outputOnly));
      },
      () => this.logger.debug('listening for prediction events'),
    );
  }

  /** `wake(outputOnly)`: true where the new events are output chunks only. */
  subscribe(predictionId: string, wake: (outputOnly: boolean) => void): () => void {
    let set = this.subscribers.get(predictionId);
    if (!set) this.subscribers.set(predictionId, (set = new Set()));
    set.add(wake);
    return () => {
      set.delete(wake);
      if (set.size === 0) this.subscribers.delete(predictionId);
    };
  }

  /** Whether events other than output came for the prediction at or after `at` (performance.now()). */
  noticedSince(predictionId: string, at: number): boolean {
    return (this.lastNotice.get(predictionId) ?? -Infinity) >= at;
  }

  async stop(): Promise<void> {
    await this.listener?.unlisten();
  }
}
