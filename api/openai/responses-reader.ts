/**
 * One reader's view of a response's numbered stream. Every reader, live or replaying, feeds the
 * whole log to the shaper, the output of failed attempts included, so the n-th event has the same
 * sequence_number for all of them. What differs is what each is sent: nothing up to its
 * `starting_after`, and no event made from a failed attempt's output (a `reset` in the log voids
 * it). A reader that holds some of an attempt that a reset then voids cannot be sent a correction
 * (the Responses API has no event that takes text back): it is told to read again after the last
 * event before that attempt's output, and a reader that does so gets one whole response.
 */
import { type ResponseEvent, ResponseEvents } from './responses-events';
import type { PredictionState } from './responses-object';
import type { ResponseObject } from './responses-protocol';

export type NumberedEvent = ResponseEvent & { sequence_number: number };

export class ResponseStreamReader {
  private next = 0;
  /** The sequence number of the first event made from the current attempt's output (undefined: none yet). */
  private attemptFrom: number | undefined;
  /** The reader has some of the current attempt's events: from before starting_after, or sent here. */
  private holdsAttempt = false;

  constructor(
    private readonly shaper: ResponseEvents,
    private readonly startingAfter: number,
  ) {}

  /** The response as created and as running. */
  start(created: ResponseObject, running: ResponseObject): NumberedEvent[] {
    return this.number(this.shaper.start(created, running), false, false);
  }

  /** One output event of the log; `voided`: a later reset in the log voids it. */
  output(data: string, voided: boolean): NumberedEvent[] {
    return this.number(this.shaper.text(data), voided, true);
  }

  /**
   * A reset in the log: the output so far came from a failed attempt. Returns, where this reader
   * holds some of it, the sequence number to read again after; the shaper starts the answer anew.
   */
  reset(): { startingAfter: number } | undefined {
    const restart = this.holdsAttempt && this.attemptFrom !== undefined ? { startingAfter: this.attemptFrom - 1 } : undefined;
    this.shaper.restart();
    this.attemptFrom = undefined;
    this.holdsAttempt = false;
    return restart;
  }

  /** The events that end the stream of a finished prediction. */
  end(prediction: PredictionState, final: ResponseObject): NumberedEvent[] {
    return this.number(this.shaper.end(prediction, final), false, false);
  }

  /** Numbers the events in order; returns those this reader is sent. */
  private number(events: ResponseEvent[], voided: boolean, ofAttempt: boolean): NumberedEvent[] {
    const sent: NumberedEvent[] = [];
    for (const { type, ...rest } of events) {
      const sequence_number = this.next++;
      if (ofAttempt) this.attemptFrom ??= sequence_number;
      if (sequence_number <= this.startingAfter) {
        if (ofAttempt) this.holdsAttempt = true;
        continue;
      }
      if (voided) continue;
      if (ofAttempt) this.holdsAttempt = true;
      sent.push({ type, sequence_number, ...rest });
    }
    return sent;
  }
}
