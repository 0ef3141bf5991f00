/**
 * Requests node's HTTP parser refuses before express sees them (headers over its size limit,
 * characters HTTP does not allow, a request that never finished arriving) get the API's JSON
 * error shape too, rather than node's bare status line.
 */
import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';

export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: Error & { code?: string }, socket: Duplex) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const [status, title, detail] =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request Header Fields Too Large', 'headers: larger than the server accepts (16 KiB with the request line)']
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'Request Timeout', 'request: the headers or body did not arrive in time']
          : [
              400,
              'Bad Request',
              'request: not valid HTTP (a header name or value holds a character HTTP does not allow, or the framing is wrong)',
            ];
    const body = JSON.stringify({ title, detail, status });
    socket.end(
      `HTTP/1.1 ${status} ${title}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}
