import type { Response } from 'express';

export interface SseEvent {
  event?: string;
  data: string;
  id?: string | number;
}

/** One event as SSE text, ending with its blank line. */
export function sseFrame(event: SseEvent): string {
  let frame = '';
  if (event.id !== undefined) frame += `id: ${event.id}\n`;
  if (event.event) frame += `event: ${event.event}\n`;
  // SSE has no escape: every line terminator (CR too) ends a data line, and the client joins
  // data lines with LF. So a CR in the text arrives as LF; nothing else is lost.
  for (const line of event.data.split(/\r\n|\r|\n/)) frame += `data: ${line}\n`;
  return `${frame}\n`;
}

/** Server-sent events on an express response. */
export class SseWriter {
  private keepAlive: NodeJS.Timeout;
  private corked = false;

  constructor(private res: Response) {
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
    });
    res.flushHeaders();
    // Proxies drop idle connections: a comment line every 15 s keeps the stream open.
    this.keepAlive = setInterval(() => res.write(': keep-alive\n\n'), 15_000);
  }

  send(event: SseEvent): void {
    this.sendFrame(sseFrame(event));
  }

  /** A frame built by sseFrame: the streams of one prediction build each event's frame once. */
  sendFrame(frame: string): void {
    if (this.res.writableEnded) return;
    this.write(frame);
  }

  /** A bare `data:` line, as OpenAI's streams use. */
  data(data: string): void {
    if (this.res.writableEnded) return;
    this.res.write(`data: ${data}\n\n`);
  }

  /**
   * The frames sent in one turn of the event loop (a batch of events read at once) leave in one
   * write to the socket, not one each.
   */
  private write(chunk: string): void {
    if (!this.corked) {
      this.corked = true;
      this.res.cork();
      process.nextTick(() => {
        this.corked = false;
        this.res.uncork();
      });
    }
    this.res.write(chunk);
  }

  end(): void {
    clearInterval(this.keepAlive);
    this.res.end();
  }

  onClose(fn: () => void): void {
    this.res.on('close', () => {
      clearInterval(this.keepAlive);
      fn();
    });
  }
}
