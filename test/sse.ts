/** Reads a server-sent event stream with eventsource-parser, the parser Replicate's client uses. */

export interface SseEvent {
  event?: string;
  data: string;
  id?: string;
}

export async function readSse(
  url: string,
  opts: { headers?: Record<string, string>; until?: (e: SseEvent, all: SseEvent[]) => boolean; signal?: AbortSignal } = {},
): Promise<{ status: number; events: SseEvent[]; contentType: string | null }> {
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...opts.headers }, signal: opts.signal });
  const events: SseEvent[] = [];
  if (!res.ok || !res.body) return { status: res.status, events, contentType: res.headers.get('content-type') };
  // eventsource-parser is ESM-only: jest reaches it through a real import().
  const { EventSourceParserStream } = await import('eventsource-parser/stream');
  const reader = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    events.push({ event: value.event, data: value.data, id: value.id });
    if (opts.until?.(events[events.length - 1], events)) {
      await reader.cancel();
      break;
    }
  }
  return { status: res.status, events, contentType: res.headers.get('content-type') };
}
