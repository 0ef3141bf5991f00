/**
 * Reads in flight, by key: a caller asking for a read that is already running gets its result
 * instead of starting another. Nothing is kept once the read settles, so no answer is older than
 * the request that asked for it; this only folds together the reads that many callers start at
 * the same moment (the streams of one prediction woken by one notification, or reconnecting at once).
 */
export class SharedReads {
  private running = new Map<string, Promise<unknown>>();

  share<T>(key: string, read: () => Promise<T>): Promise<T> {
    const known = this.running.get(key) as Promise<T> | undefined;
    if (known) return known;
    const started = read().finally(() => this.running.delete(key));
    this.running.set(key, started);
    return started;
  }

  /** Reads in flight now (for tests). */
  get size(): number {
    return this.running.size;
  }
}
