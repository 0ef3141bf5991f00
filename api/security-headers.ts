/**
 * Response headers that keep a browser from turning what the API sends into something else:
 * nothing is sniffed into another type, nothing is framed, no page leaks its URL as a referrer.
 * Pages (the playground, the reference) replace the API's policy with one of their own.
 */
import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';

/** JSON and event streams load nothing and run nothing. */
export const API_CSP = "default-src 'none'; frame-ancestors 'none'";

/** Bytes a tenant uploaded or a model wrote: even opened directly, they run nothing and reach nothing. */
export const UNTRUSTED_CONTENT_CSP = "default-src 'none'; sandbox";

/** The playground: its own script and style files, its own API, and nothing inline. */
export const PLAYGROUND_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** A policy for a page whose only script and style are the inline ones the API wrote: allowed by hash. */
export function inlinePageCsp(html: string): string {
  const hashes = (tag: string) =>
    [...html.matchAll(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, 'g'))]
      .map((m) => `'sha256-${createHash('sha256').update(m[1]).digest('base64')}'`)
      .join(' ') || "'none'";
  return `default-src 'none'; script-src ${hashes('script')}; style-src ${hashes('style')}; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'`;
}

export function securityHeaders(opts: { https: boolean }): RequestHandler {
  return (_req, res, next) => {
    res.set({
      'X-Content-Type-Options': 'nosniff',
      'Content-Security-Policy': API_CSP,
      'X-Frame-Options': 'DENY',
      'Referrer-Policy': 'no-referrer',
      ...(opts.https ? { 'Strict-Transport-Security': 'max-age=15552000' } : {}),
    });
    next();
  };
}

/** A page's own policy in place of the API's (`express.static` hands its hook a bare ServerResponse). */
export function pagePolicy(res: ServerResponse, csp: string): void {
  res.setHeader('Content-Security-Policy', csp);
  res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
}
