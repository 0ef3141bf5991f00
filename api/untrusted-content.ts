/**
 * Files tenants upload and models write are served from the API's origin, beside the playground
 * and its token. However a browser reaches them (a link, an address bar, an iframe), they must
 * never render there: a download, of a type that cannot run, under a policy that runs nothing.
 */
import type { Response } from 'express';
import { cleanFileName } from '../lib/file-name';
import { UNTRUSTED_CONTENT_CSP } from './security-headers';

/** Types a browser only ever displays, never executes; everything else goes out as bytes. */
const PASSIVE_TYPES = new Set([
  'application/octet-stream',
  'application/json',
  'application/jsonl',
  'application/x-ndjson',
  'text/plain',
  'text/csv',
  'image/png',
  'image/jpeg',
  'image/gif',
  'image/webp',
  'image/avif',
]);

/** The type to send for a declared one: the declared type itself only when it is passive. */
export function servedContentType(declared: string): string {
  const essence = declared.split(';')[0].trim().toLowerCase();
  return PASSIVE_TYPES.has(essence) || /^(audio|video)\/[a-z0-9][\w.+-]*$/.test(essence) ? essence : 'application/octet-stream';
}

export function untrustedContentHeaders(res: Response, file: { name: string; contentType: string }): void {
  // res.attachment encodes the name (RFC 6266, with an ASCII fallback) and guesses a type from its
  // extension, which the type below replaces. Cleaned here too, for names stored before uploads were.
  res.attachment(cleanFileName(file.name));
  res.set({
    'Content-Type': servedContentType(file.contentType),
    'X-Content-Type-Options': 'nosniff',
    'Content-Security-Policy': UNTRUSTED_CONTENT_CSP,
    // The signed URL is the capability: other sites may embed it, as Replicate's outputs are embedded.
    'Cross-Origin-Resource-Policy': 'cross-origin',
  });
}
