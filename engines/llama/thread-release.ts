/**
 * Gives a context's CPU threads back the moment its decodes are done.
 *
 * node-llama-cpp (3.22.1) splits the Llama's `maxThreads` among the contexts that hold a
 * reservation, and a context keeps its reservation until a timer of 0 ms after its queue of
 * decodes runs dry. Speculative decoding alternates two contexts, the draft's and the target's,
 * each starting within that millisecond of the other finishing: so each found the other's
 * reservation still held and decoded on half the threads. The target checked 17 drafted tokens on
 * one thread of two (issue 16: the Q8_0 draft's speedup capped near 1.4× where llama.cpp's own
 * timings of the same files allow ~1.8–2.3×). Released at once, a context decoding alone gets all
 * the threads, and contexts that really decode at the same time still share them.
 *
 * It replaces the context's internal `_scheduleToFreeReservedThreads` with its
 * `_freeReservedThreads`; node-llama-cpp is pinned to an exact version for this, and `install`
 * reports false where either is missing, leaving the context as it was.
 */
import type { LlamaContext } from 'node-llama-cpp';

interface ThreadReservation {
  _scheduleToFreeReservedThreads?: () => void;
  _freeReservedThreads?: () => void;
}

export function releaseThreadsAtOnce(context: LlamaContext): boolean {
  const internal = context as unknown as ThreadReservation;
  const free = internal._freeReservedThreads;
  if (typeof internal._scheduleToFreeReservedThreads !== 'function' || typeof free !== 'function') return false;
  internal._scheduleToFreeReservedThreads = () => free.call(context);
  return true;
}
