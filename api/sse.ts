import type { Response } from 'express';

/** Server-sent events on an express response. */
export class SseWriter {
  private keepAlive: NodeJS.Timeout;

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

  send(event: { event?: string; data: string; id?: string | number }): void {
    if (this.res.writableEnded) return;
    let frame = '';
    if (event.id !== undefined) frame += `id: ${event.id}\n`;
    if (event.event) frame += `event: ${event.event}\n`;
    // SSE has no escape: every line terminator (CR too) ends a data line, and the client joins
    // data lines with LF. So a CR in the text arrives as LF; nothing else is lost.
    for (const line of event.data.split(/\r\n|\r|\n/)) frame += `data: ${line}\n`;
    this.res.write(`${frame}\n`);
  }

  /** A bare `data:` line, as OpenAI's streams use. */
  data(data: string): void {
    if (this.res.writableEnded) return;
    this.res.write(`data: ${data}\n\n`);
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
