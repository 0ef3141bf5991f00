/**
 * An SSE client that rides out a dropped connection the way EventSource does: it reconnects with
 * `Last-Event-ID` until the stream's `done` event, so a test can see what a real client ends with
 * when the API under it dies.
 */
import type { SseEvent } from './sse';

/** EventSource's reconnection delay (browsers use about 3 s; the server may change it). */
const RECONNECT_MS = 250;

export interface FollowedStream {
  /** Every event received so far, in order, across connections: the test may watch it grow. */
  events: SseEvent[];
  /** How many times the connection was made again. */
  reconnects: number;
  /** Resolves at `done`; fails past the timeout with what had arrived. */
  finished: Promise<void>;
}

export function followSse(urlOf: () => string, { timeoutMs = 180_000 } = {}): FollowedStream {
  const stream: FollowedStream = { events: [], reconnects: 0, finished: Promise.resolve() };
  stream.finished = (async () => {
    // eventsource-parser is ESM-only: jest reaches it through a real import().
    const { EventSourceParserStream } = await import('eventsource-parser/stream');
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const lastId = stream.events.at(-1)?.id;
      try {
        const res = await fetch(urlOf(), {
          headers: { accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) },
          signal: AbortSignal.timeout(Math.max(1, deadline - Date.now())),
        });
        if (res.ok && res.body) {
          const reader = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            stream.events.push({ event: value.event, data: value.data, id: value.id });
            if (value.event === 'done') {
              await reader.cancel();
              return;
            }
          }
        }
      } catch {
        // Cut off (the server died or restarted): connect again below, as EventSource would.
      }
      if (Date.now() > deadline) {
        throw new Error(
          `no done event within ${timeoutMs} ms; ${stream.events.length} events, last: ${JSON.stringify(stream.events.at(-1))}`,
        );
      }
      stream.reconnects += 1;
      await new Promise((r) => setTimeout(r, RECONNECT_MS));
    }
  })();
  return stream;
}

/**
 * The text a client assembles from a stream: its `output` events joined, dropping what came
 * before a `reset` (output of an engine attempt that failed).
 */
export function streamedText(events: SseEvent[]): string {
  const lastReset = events.map((e) => e.event).lastIndexOf('reset');
  return events
    .slice(lastReset + 1)
    .filter((e) => e.event === 'output')
    .map((e) => e.data)
    .join('');
}
