/**
 * A Hugging Face-style hub on 127.0.0.1 for `kiln models pull`: the hub answers
 * `HEAD|GET /{owner}/{repo}/resolve/{revision}/{file}` with a 302 to a CDN on another port
 * (another origin, as huggingface.co's CDN is) and the file's `x-linked-etag`, `x-linked-size` and
 * `x-repo-commit`; the CDN serves ranged GETs (206) and can be told to cut the next download off
 * after some bytes. Both record every request they get.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HubEntry {
  bytes: Buffer;
  /** What the hub says the sha256 is: the bytes' own unless a test says otherwise. */
  sha256?: string;
  /** What the hub says the size is: the bytes' own unless a test says otherwise. */
  size?: number;
}

export interface SeenRequest {
  method: string;
  path: string;
  range?: string;
  authorization?: string;
}

export const HUB_COMMIT = '4f1c0b9e2d7a6c5b3e8f0a1d2c3b4a5e6f7d8c9b';

export class FakeHub {
  readonly hubRequests: SeenRequest[] = [];
  readonly cdnRequests: SeenRequest[] = [];
  /** The next CDN download writes this many bytes of its body, then destroys the socket. */
  cutNextAfter?: number;
  private readonly files = new Map<string, HubEntry>();
  private readonly blobs = new Map<string, Buffer>();
  private hub!: http.Server;
  private cdn!: http.Server;

  /** `owner/repo/file` (any revision resolves to it). */
  add(path: string, entry: HubEntry): void {
    this.files.set(path, entry);
    this.blobs.set(createHash('sha256').update(entry.bytes).digest('hex'), entry.bytes);
  }

  get url(): string {
    return `http://127.0.0.1:${(this.hub.address() as AddressInfo).port}`;
  }

  private get cdnUrl(): string {
    return `http://127.0.0.1:${(this.cdn.address() as AddressInfo).port}`;
  }

  async start(): Promise<void> {
    this.hub = http.createServer((req, res) => this.resolve(req, res));
    this.cdn = http.createServer((req, res) => this.serve(req, res));
    await Promise.all([this.hub, this.cdn].map((s) => new Promise<void>((ok) => s.listen(0, '127.0.0.1', ok))));
  }

  async stop(): Promise<void> {
    for (const s of [this.hub, this.cdn]) s.closeAllConnections();
    await Promise.all([this.hub, this.cdn].map((s) => new Promise((done) => s.close(done))));
  }

  private seen(req: http.IncomingMessage, into: SeenRequest[]): void {
    into.push({ method: req.method!, path: req.url!, range: req.headers.range, authorization: req.headers.authorization });
  }

  private resolve(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.seen(req, this.hubRequests);
    const match = /^\/([^/]+)\/([^/]+)\/resolve\/[^/]+\/(.+)$/.exec(req.url ?? '');
    const entry = match && this.files.get(`${match[1]}/${match[2]}/${decodeURIComponent(match[3])}`);
    if (!entry) return void res.writeHead(404, { 'x-error-code': 'EntryNotFound' }).end();
    const real = createHash('sha256').update(entry.bytes).digest('hex');
    res
      .writeHead(302, {
        location: `${this.cdnUrl}/repos/${real}?signature=test`,
        'x-linked-etag': `"${entry.sha256 ?? real}"`,
        'x-linked-size': String(entry.size ?? entry.bytes.length),
        'x-repo-commit': HUB_COMMIT,
        etag: '"a-git-blob-sha1"',
      })
      .end();
  }

  private serve(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.seen(req, this.cdnRequests);
    const bytes = this.blobs.get(/^\/repos\/([a-f0-9]{64})/.exec(req.url ?? '')?.[1] ?? '');
    if (!bytes) return void res.writeHead(404).end();
    const start = Number(/^bytes=(\d+)-$/.exec(req.headers.range ?? '')?.[1] ?? 0);
    const body = bytes.subarray(start);
    res.writeHead(req.headers.range ? 206 : 200, {
      'content-length': String(body.length),
      ...(req.headers.range ? { 'content-range': `bytes ${start}-${bytes.length - 1}/${bytes.length}` } : {}),
    });
    if (req.method === 'HEAD') return void res.end();
    const cut = this.cutNextAfter;
    this.cutNextAfter = undefined;
    if (cut === undefined) return void res.end(body);
    res.write(body.subarray(0, cut), () => res.socket?.destroy());
  }
}
