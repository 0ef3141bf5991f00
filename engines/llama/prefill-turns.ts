/**
 * A prefill node's prompts are evaluated one at a time, in the order they arrived. Evaluated side
 * by side in one context, llama.cpp shares each batch among them, so every prompt waits for all
 * the others and the first of a backlog is done no sooner than the last: one at a time, the first
 * is done after its own evaluation, and no prompt is done later than side by side. A prompt waiting
 * here still counts as tokens in flight, so placement sees the backlog (domain/prefill-split.ts).
 */
export class PrefillTurns {
  /** Settles once every turn taken so far has been given back. */
  private last: Promise<void> = Promise.resolve();

  /**
   * Waits until every earlier turn has been given back, then gives the function that gives this
   * one back. A signal that aborts first rejects with its reason, and the turn passes on in order.
   */
  async take(signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    const before = this.last;
    let giveBack!: () => void;
    const mine = new Promise<void>((resolve) => (giveBack = resolve));
    this.last = before.then(() => mine);
    if (!signal) {
      await before;
      return giveBack;
    }
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      await Promise.race([before, aborted]);
      return giveBack;
    } catch (err) {
      giveBack();
      throw err;
    } finally {
      signal.removeEventListener('abort', onAbort!);
    }
  }
}
