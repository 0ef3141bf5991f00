import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Capability URLs: a stream URL carries an HMAC of what it grants, so a client that only has the
 * URL (as Replicate's clients do for `urls.stream`) can use it without the API token.
 */
export class UrlSigner {
  constructor(private key: string) {}

  sign(subject: string): string {
    return createHmac('sha256', this.key).update(subject).digest('base64url').slice(0, 32);
  }

  verify(subject: string, signature: unknown): boolean {
    if (typeof signature !== 'string') return false;
    const expected = Buffer.from(this.sign(subject));
    const given = Buffer.from(signature);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}
