/**
 * Where a waiting prediction stands in its version's fair queue, and when it should start: pure
 * policy, read by `GET /v1/predictions/{id}` and by a create that carries `max_queue_seconds`.
 *
 * Temporal's fair queue serves fairness keys in proportion to their weights (stride scheduling):
 * the i-th waiting task of a key with weight w goes at virtual time (i + 1) / w. A prediction
 * with `earlier` of its own key's tasks ahead of it goes at (earlier + 1) / w_mine, so another
 * key's tasks go first while their virtual time is lower, up to the number that key has waiting.
 * Work that arrives later can still go first (that is what fairness means), so a position can
 * grow; the estimate is of the queue as it is now.
 */

/** The predictions of one fairness key waiting on the version. */
export interface WaitingKey {
  weight: number;
  /** All of this key's waiting predictions. */
  waiting: number;
  /** Those of them that arrived before the prediction asked about. */
  earlier: number;
}

export interface QueueState {
  /** The prediction's own fairness key: its weight and its tasks that arrived before it. */
  mine: { weight: number; earlier: number };
  /** Every other fairness key with predictions waiting on the version. */
  others: WaitingKey[];
  /** Predictions of the version running now. */
  running: number;
  /** Sequences serving the version on live nodes (0: not loaded anywhere, a warm-up comes first). */
  slots: number;
  /** Recent median time from start to end of the version's predictions; null: none measured yet. */
  serviceSeconds: number | null;
  /**
   * Recent median seconds from a slot coming free to its next waiting prediction's start (the
   * final write, the worker's next poll, the dispatch); null: no slot was seen passing to one.
   */
  handoverSeconds: number | null;
}

export interface QueueEstimate {
  /** 1: the next to start. Counts every account's predictions ahead of it in fairness order. */
  position: number;
  /** Predictions of all accounts that start before it. */
  aheadAll: number;
  /** Seconds until it should start; null when nothing is measured or no node serves the version yet. */
  etaSeconds: number | null;
}

/** How many of `key`'s waiting tasks go before a task at virtual time `at`; a tie goes to the one that arrived first. */
function goingBefore(key: WaitingKey, at: number): number {
  const x = at * key.weight;
  const strictlyBefore = Math.min(key.waiting, Math.ceil(x) - 1);
  const tie = Number.isInteger(x) && x <= key.waiting && key.earlier >= x ? 1 : 0;
  return Math.max(0, strictlyBefore + tie);
}

export function estimateQueue(state: QueueState): QueueEstimate {
  const at = (state.mine.earlier + 1) / state.mine.weight;
  const aheadAll = state.mine.earlier + state.others.reduce((sum, key) => sum + goingBefore(key, at), 0);
  return { position: aheadAll + 1, aheadAll, etaSeconds: etaOf(state, aheadAll) };
}

/**
 * Free slots take the first predictions at once; each later one waits for a slot to come free.
 * A busy slot passes to its next task every service time plus the hand-over between the two, so
 * the queue drains at `slots / (service + hand-over)` a second. The hand-over is measured from a
 * slot coming free to the next start of a prediction created before that, so it takes in what
 * holds a waiting prediction up besides the slots: the worker's poll and dispatch, and on a
 * saturated machine the wait for the CPU in the control queue and the first workflow task.
 */
function etaOf(state: QueueState, aheadAll: number): number | null {
  if (state.serviceSeconds === null || state.slots === 0) return null;
  const free = Math.max(0, state.slots - state.running);
  if (aheadAll < free) return 0;
  const completionsNeeded = aheadAll - free + 1;
  const rate = state.slots / (state.serviceSeconds + (state.handoverSeconds ?? 0));
  return Math.round((completionsNeeded / rate) * 10) / 10;
}
