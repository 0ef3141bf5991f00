/**
 * Capability URLs that expire. The signature covers what the URL grants and until when, so
 * neither can be changed; whoever reads the resource a URL came with gets a fresh one, so a URL
 * never needs to outlive its expiry.
 */
import type { UrlSigner } from './signing';

/** `expires=<unix seconds>&sig=<signature>`, for a URL's query. */
export function signUntil(signer: UrlSigner, subject: string, ttlSeconds: number, now = Date.now()): string {
  const expires = Math.floor(now / 1000) + ttlSeconds;
  return `expires=${expires}&sig=${signer.sign(`${subject}:${expires}`)}`;
}

/** Whether a URL's `expires` and `sig` grant `subject` now. */
export function verifyUntil(signer: UrlSigner, subject: string, expires: unknown, sig: unknown, now = Date.now()): boolean {
  if (typeof expires !== 'string' || !/^\d{1,12}$/.test(expires)) return false;
  const e = Number(expires);
  return e * 1000 > now && signer.verify(`${subject}:${e}`, sig);
}
