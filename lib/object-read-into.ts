/**
 * An object's bytes handed to a callback through one reused buffer: a GET on a plain socket that
 * node reads into that buffer (net's `onread`), signed by the S3 client's own signer.
 *
 * Why not the SDK's stream: its socket allocates a new buffer for every read, about 64 KiB, and in
 * an engine process, whose model and contexts V8 counts as external memory, the 250 such buffers
 * of a 16 MiB KV snapshot set off several external-memory mark-compacts a download (5–20 ms each
 * on the 2-core box, and the loop waits through them). A 15.7 MiB snapshot took 30–85 ms to arrive
 * through the stream and 15–25 ms this way (`npm run bench -- kv-snapshot`, docs/benchmarks.md).
 *
 * Only where the request is a plain HTTP/1.1 GET to a host and port: an `http:` endpoint with
 * path-style addressing (MinIO, a store on the node's own network). Everything else (TLS,
 * virtual-hosted buckets) goes through the SDK; `canReadInto` says which.
 */
import net from 'node:net';
import type { S3Client } from '@aws-sdk/client-s3';
import { KilnError } from './kiln-error';

/** The GET failed: an HTTP status other than 200, a cut connection, a timeout or an abort. */
export class ObjectReadError extends KilnError {
  constructor(
    message: string,
    /** The HTTP status, where the store answered one. */
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface ReadIntoOptions {
  signal?: AbortSignal;
  /** A connection silent this long fails (default 30 s). */
  idleMs?: number;
}

/** Bytes read from the socket at most per callback. */
const READ_BUFFER_BYTES = 256 * 1024;
/** The most of an error response's body kept for the message. */
const ERROR_BODY_BYTES = 4096;

interface Endpoint {
  protocol: string;
  hostname: string;
  port?: number;
  path: string;
}

interface SignableRequest {
  method: string;
  protocol: string;
  hostname: string;
  port?: number;
  path: string;
  query: Record<string, string>;
  headers: Record<string, string>;
}

/** What of the SDK's resolved configuration a signed GET needs. */
interface ResolvedS3Config {
  forcePathStyle?: boolean;
  endpoint?: () => Promise<Endpoint>;
  signer: () => Promise<{ sign(request: SignableRequest): Promise<SignableRequest> }>;
}

const resolved = (client: S3Client) => client.config as unknown as ResolvedS3Config;

/** Whether `client`'s requests can be sent as a plain GET on a socket (http, path-style). */
export async function canReadInto(client: S3Client): Promise<boolean> {
  const config = resolved(client);
  if (!config.forcePathStyle || !config.endpoint) return false;
  return (await config.endpoint()).protocol === 'http:';
}

/**
 * GETs `bucket`/`key` and calls `sink` with its bytes in order. A chunk is a view of the reused
 * buffer, valid only during the call: hash it or write it, never keep it. Resolves with the
 * byte count once the whole body (its Content-Length) has arrived; a sink that throws ends the
 * read with its error. Only where canReadInto(client).
 */
export async function readObjectInto(
  client: S3Client,
  bucket: string,
  key: string,
  sink: (chunk: Buffer) => void,
  opts: ReadIntoOptions = {},
): Promise<number> {
  const config = resolved(client);
  const endpoint = await config.endpoint!();
  const base = endpoint.path.endsWith('/') ? endpoint.path : `${endpoint.path}/`;
  const host = endpoint.port ? `${endpoint.hostname}:${endpoint.port}` : endpoint.hostname;
  const signed = await (await config.signer()).sign({
    method: 'GET',
    protocol: endpoint.protocol,
    hostname: endpoint.hostname,
    port: endpoint.port,
    path: `${base}${uriEscape(bucket)}/${key.split('/').map(uriEscape).join('/')}`,
    query: {},
    headers: { host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
  });
  opts.signal?.throwIfAborted();
  return new Promise<number>((resolve, reject) => {
    const response = new ResponseReader(key, sink);
    let settled = false;
    const finish = (err?: unknown) => {
      if (settled) return;
      settled = true;
      opts.signal?.removeEventListener('abort', onAbort);
      socket.destroy();
      if (err) reject(err);
      else resolve(response.bodyBytes);
    };
    const onAbort = () => finish(new ObjectReadError(`GET ${key}: aborted`, undefined, { cause: opts.signal?.reason }));
    const socket = net.connect({
      host: endpoint.hostname,
      port: endpoint.port ?? 80,
      onread: {
        buffer: Buffer.allocUnsafe(READ_BUFFER_BYTES),
        callback: (n, buffer) => {
          if (settled) return false;
          try {
            if (response.take(Buffer.from(buffer.buffer, buffer.byteOffset, n))) finish(response.failure());
          } catch (err) {
            finish(err);
          }
          return !settled;
        },
      },
    });
    socket.setNoDelay(true);
    socket.setTimeout(opts.idleMs ?? 30_000, () => finish(new ObjectReadError(`GET ${key}: no data for ${opts.idleMs ?? 30_000} ms`)));
    socket.on('error', (err) => finish(new ObjectReadError(`GET ${key}: ${err.message}`, undefined, { cause: err })));
    socket.on('close', () => finish(response.failure() ?? response.cutShort()));
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const head = [`GET ${signed.path} HTTP/1.1`, ...Object.entries(signed.headers).map(([k, v]) => `${k}: ${v}`), 'connection: close'];
    socket.write(`${head.join('\r\n')}\r\n\r\n`);
  });
}

/** A path segment escaped as S3's signatures expect: RFC 3986, so `!'()*` too, as the SDK escapes them. */
const uriEscape = (segment: string) =>
  encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** One response, fed socket reads in order: its head, then its body to the sink (or kept, for an error). */
class ResponseReader {
  private head = Buffer.alloc(0);
  private status = 0;
  private length = -1;
  private errorBody: Buffer[] = [];
  bodyBytes = 0;

  constructor(
    private readonly key: string,
    private readonly sink: (chunk: Buffer) => void,
  ) {}

  /** Takes one read; true once the response is complete (a whole body, or an error's head and enough of its body). */
  take(chunk: Buffer): boolean {
    let body = chunk;
    if (this.length < 0) {
      this.head = Buffer.concat([this.head, chunk]);
      const end = this.head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (this.head.length > 64 * 1024) throw new ObjectReadError(`GET ${this.key}: a response head over 64 KiB`);
        return false;
      }
      this.parseHead(this.head.subarray(0, end).toString('latin1'));
      body = this.head.subarray(end + 4);
    }
    const wanted = Math.min(body.length, this.length - this.bodyBytes);
    if (wanted > 0) {
      const part = body.subarray(0, wanted);
      if (this.status === 200) this.sink(part);
      else if (this.bodyBytes < ERROR_BODY_BYTES) this.errorBody.push(Buffer.from(part));
      this.bodyBytes += wanted;
    }
    return this.bodyBytes >= this.length || (this.status !== 200 && this.bodyBytes >= ERROR_BODY_BYTES);
  }

  private parseHead(text: string): void {
    const [statusLine, ...fields] = text.split('\r\n');
    const status = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '');
    if (!status) throw new ObjectReadError(`GET ${this.key}: not an HTTP response (${JSON.stringify(statusLine?.slice(0, 40))})`);
    this.status = Number(status[1]);
    const field = fields.find((f) => f.slice(0, f.indexOf(':')).trim().toLowerCase() === 'content-length');
    const length = field?.slice(field.indexOf(':') + 1).trim();
    if (length === undefined || !/^\d+$/.test(length)) {
      throw new ObjectReadError(`GET ${this.key}: HTTP ${this.status} without a Content-Length`, this.status);
    }
    this.length = Number(length);
  }

  /** The error a complete non-200 response is, with the store's error code where its body names one. */
  failure(): ObjectReadError | undefined {
    if (this.length < 0 || this.status === 200) return undefined;
    const body = Buffer.concat(this.errorBody).toString('utf8');
    const code = /<Code>([^<]*)<\/Code>/.exec(body)?.[1];
    return new ObjectReadError(`GET ${this.key}: HTTP ${this.status}${code ? ` ${code}` : ''}`, this.status);
  }

  /** The error for a connection that closed before the response was whole; undefined when it was. */
  cutShort(): ObjectReadError | undefined {
    if (this.length >= 0 && this.bodyBytes >= this.length) return undefined;
    const got = this.length < 0 ? 'before the response head' : `after ${this.bodyBytes} of ${this.length} bytes`;
    return new ObjectReadError(`GET ${this.key}: the connection closed ${got}`);
  }
}
