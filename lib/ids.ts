import { createHash, randomBytes } from 'node:crypto';

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

function base32(bytes: Buffer, length: number): string {
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out.slice(0, length);
}

/** A Replicate-style id: 26 lower-case base32 characters. */
export function newId(): string {
  return base32(randomBytes(17), 26);
}

/** The same id for the same account and key, so a retried create finds its prediction. */
export function idFromKey(accountId: string, key: string): string {
  return base32(createHash('sha256').update(`${accountId}\0${key}`).digest(), 26);
}

export function sha256Hex(value: string | Buffer): string {
  return createHash('sha256').update(value).digest('hex');
}
