/**
 * Gathers the decodes of a context's sequences into whole batches, ordered by sequence id.
 *
 * node-llama-cpp (3.22.1) samples each sequence's next token on its own and queues that sequence's
 * next decode as soon as its sampling comes back; its dispatcher then decodes whatever is queued
 * at that moment. So N streams become batches of N−1 and 1 tokens in turn, in arbitrary sequence
 * order, and llama.cpp's non-unified KV cache (which node-llama-cpp always asks for) splits a batch
 * into one micro-batch per run of consecutive sequence ids: at 16 streams a decode did ~6 passes
 * over the weights where one would do (measured; issue 19).
 *
 * This holds each sequence's decode request until every sequence of the last released group has
 * asked again (or left, or `maxWaitMs` passed since that group's decode came back), then hands them all to node-llama-cpp in one go,
 * sorted by sequence id, and lets it dispatch them at the end of that same tick: one batch, one
 * micro-batch per run of consecutive ids. It wraps the context's internal `_decodeTokens` (the one
 * entry all evaluation goes through); node-llama-cpp is pinned to an exact version for this, and
 * `install` reports false where that entry is missing, leaving the context as it was.
 */
import type { LlamaContext } from 'node-llama-cpp';

interface DecodeRequest {
  sequenceId: number;
}
type DecodeTokens = (request: DecodeRequest, ...rest: unknown[]) => Promise<unknown>;
interface Held {
  request: DecodeRequest;
  rest: unknown[];
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
}

export interface GathererStats {
  /** Groups handed to node-llama-cpp, and the decode requests in them. */
  groups: number;
  requests: number;
  /** Groups released by the wait running out rather than by every expected sequence asking. */
  timeouts: number;
}

export class DecodeGatherer {
  readonly stats: GathererStats = { groups: 0, requests: 0, timeouts: 0 };
  private held: Held[] = [];
  /** Sequences of the last released group that have not asked again (nor left) yet. */
  private expected = new Set<number>();
  private timer: NodeJS.Timeout | undefined;
  /** Requests handed on whose decode (and sampling) has not come back yet. */
  private inFlight = 0;
  private decode?: DecodeTokens;

  constructor(private readonly maxWaitMs: number) {}

  /** Wraps the context's decode entry; false (and nothing changed) where node-llama-cpp has none. */
  install(context: LlamaContext): boolean {
    const internal = context as unknown as { _decodeTokens?: DecodeTokens };
    if (typeof internal._decodeTokens !== 'function') return false;
    this.decode = internal._decodeTokens.bind(context);
    internal._decodeTokens = (request, ...rest) =>
      new Promise((resolve, reject) => {
        this.held.push({ request, rest, resolve, reject });
        this.expected.delete(request.sequenceId);
        if (this.expected.size === 0) this.release(false);
        else this.armWait();
      });
    return true;
  }

  /** The sequence will not decode again soon (its generation ended): nobody waits for it. */
  leave(sequenceId: number): void {
    if (!this.expected.delete(sequenceId)) return;
    if (this.expected.size === 0 && this.held.length > 0) this.release(false);
  }

  /** Dispatch schedule for the context: the group was gathered already, so at the end of this tick. */
  static readonly dispatchSchedule = (dispatch: () => void): void => queueMicrotask(dispatch);

  dispose(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.release(false);
  }

  /**
   * The wait for the expected sequences starts once their last decode has come back: until then
   * they cannot ask again, however long a decode takes (tens of ms for a big model on CPU).
   */
  private armWait(): void {
    if (this.inFlight > 0 || this.held.length === 0) return;
    this.timer ??= setTimeout(() => this.release(true), this.maxWaitMs);
  }

  private release(timedOut: boolean): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const group = this.held.sort((a, b) => a.request.sequenceId - b.request.sequenceId);
    this.held = [];
    this.expected = new Set(group.map((h) => h.request.sequenceId));
    if (group.length === 0) return;
    this.stats.groups += 1;
    this.stats.requests += group.length;
    if (timedOut) this.stats.timeouts += 1;
    this.inFlight += group.length;
    const settle = () => {
      this.inFlight -= 1;
      this.armWait();
    };
    for (const h of group) {
      this.decode!(h.request, ...h.rest).then(
        (value) => {
          h.resolve(value);
          settle();
        },
        (err: unknown) => {
          h.reject(err);
          settle();
        },
      );
    }
  }
}
