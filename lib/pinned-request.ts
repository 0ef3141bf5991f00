/**
 * An HTTP request to a target that lib/webhook-target.ts vetted, connected to the address it
 * checked: the host name still goes out as Host and as TLS SNI (so certificates are checked
 * against it), but DNS is not asked again, so an answer that changed since the check (DNS
 * rebinding) is never used. Webhook delivery and input fetches both go through here.
 */
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { WebhookTarget } from './webhook-target';

export interface PinnedRequestOptions {
  method: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Socket inactivity limit. */
  timeoutMs: number;
  signal?: AbortSignal;
}

/** A `lookup` for http.request that answers every question with the vetted address. */
function pinnedLookup(target: Pick<WebhookTarget, 'address' | 'family'>): LookupFunction {
  return (_host, opts, cb) => {
    if (opts.all)
      (cb as unknown as (err: null, all: Array<{ address: string; family: number }>) => void)(null, [
        { address: target.address, family: target.family },
      ]);
    else cb(null, target.address, target.family);
  };
}

/** Sends the request and resolves with the response head; the caller reads or drains the body. */
export function pinnedRequest(target: WebhookTarget, opts: PinnedRequestOptions): Promise<IncomingMessage> {
  const client = target.url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const headers = { ...opts.headers, ...(opts.body === undefined ? {} : { 'content-length': Buffer.byteLength(opts.body).toString() }) };
    const req = client.request(
      target.url,
      { method: opts.method, headers, timeout: opts.timeoutMs, signal: opts.signal, lookup: pinnedLookup(target) },
      resolve,
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${opts.timeoutMs} ms`)));
    req.on('error', reject);
    req.end(opts.body);
  });
}
