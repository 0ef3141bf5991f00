import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { type Config, ConfigError } from './config';
import { KilnError } from './kiln-error';

/**
 * What a signature grants. Each purpose has its own key, derived from the root key with HKDF, so
 * a process that holds one purpose's key (the engine signs file references and checks file URLs)
 * can forge nothing else, and a signature made for one purpose never verifies for another.
 */
export const signingPurposes = ['stream', 'file', 'ref', 'other'] as const;
export type SigningPurpose = (typeof signingPurposes)[number];

/** Subjects are `<purpose>:…`; a prefix that names no purpose is signed with the `other` key. */
export function purposeOf(subject: string): SigningPurpose {
  const prefix = subject.slice(0, subject.indexOf(':')) as SigningPurpose;
  return (signingPurposes as readonly string[]).includes(prefix) ? prefix : 'other';
}

/** The key of one purpose, derived from the root key (HKDF-SHA256, 32 bytes). */
export function purposeKey(root: string, purpose: SigningPurpose): Buffer {
  return Buffer.from(hkdfSync('sha256', root, 'kiln url signing', `kiln:${purpose}`, 32));
}

export class MissingSigningKeyError extends KilnError {}

/**
 * Capability URLs: a stream URL carries an HMAC of what it grants, so a client that only has the
 * URL (as Replicate's clients do for `urls.stream`) can use it without the API token.
 *
 * `new UrlSigner(root)` holds every purpose's key (the API and the control worker);
 * `UrlSigner.withKeys({...})` holds only those given, and refuses to sign or verify the rest.
 */
export class UrlSigner {
  private readonly keys: Partial<Record<SigningPurpose, Buffer>>;
  /** Signatures made with the root itself, before purpose keys, on references stored in outputs. */
  private readonly legacyRefKey?: string;

  constructor(source: string | Partial<Record<SigningPurpose, Buffer>>) {
    if (typeof source === 'string') {
      this.keys = Object.fromEntries(signingPurposes.map((p) => [p, purposeKey(source, p)]));
      this.legacyRefKey = source;
    } else {
      this.keys = { ...source };
    }
  }

  static withKeys(keys: Partial<Record<SigningPurpose, Buffer>>): UrlSigner {
    return new UrlSigner(keys);
  }

  /** A signer that holds one purpose's key only. */
  static forPurpose(root: string, purpose: SigningPurpose): UrlSigner {
    return UrlSigner.withKeys({ [purpose]: purposeKey(root, purpose) });
  }

  has(purpose: SigningPurpose): boolean {
    return this.keys[purpose] !== undefined;
  }

  sign(subject: string): string {
    return hmac(this.key(purposeOf(subject)), subject);
  }

  verify(subject: string, signature: unknown): boolean {
    if (typeof signature !== 'string') return false;
    const purpose = purposeOf(subject);
    if (same(hmac(this.key(purpose), subject), signature)) return true;
    return purpose === 'ref' && this.legacyRefKey !== undefined && same(hmac(this.legacyRefKey, subject), signature);
  }

  private key(purpose: SigningPurpose): Buffer {
    const key = this.keys[purpose];
    if (!key) throw new MissingSigningKeyError(`this process holds no key for ${purpose} signatures`);
    return key;
  }
}

function hmac(key: Buffer | string, subject: string): string {
  return createHmac('sha256', key).update(subject).digest('base64url').slice(0, 32);
}

function same(expected: string, given: string): boolean {
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Where a process without the root key finds a purpose's key (hex, as `purposeKey` derives it). */
const purposeKeyVariables = { file: 'KILN_FILE_URL_KEY', ref: 'KILN_FILE_REF_KEY' } as const;
type KeyConfig = Pick<Config, 'KILN_URL_SIGNING_KEY' | (typeof purposeKeyVariables)[keyof typeof purposeKeyVariables]>;

/**
 * The signer a process's configuration gives it: every purpose from the root key (the API and the
 * control worker), or only the purpose keys it was handed (engine nodes, which never see the root).
 * Stops the process at start, naming the variable, when a purpose it `needs` has no key.
 */
export function urlSignerFromConfig(c: KeyConfig, needs: readonly SigningPurpose[]): UrlSigner {
  const signer = c.KILN_URL_SIGNING_KEY
    ? new UrlSigner(c.KILN_URL_SIGNING_KEY)
    : UrlSigner.withKeys(
        Object.fromEntries(
          Object.entries(purposeKeyVariables)
            .filter(([, name]) => c[name])
            .map(([purpose, name]) => [purpose, Buffer.from(c[name]!, 'hex')]),
        ),
      );
  const missing = needs.filter((p) => !signer.has(p));
  if (missing.length > 0) {
    const names = missing.map((p) =>
      p in purposeKeyVariables
        ? `${purposeKeyVariables[p as keyof typeof purposeKeyVariables]} or KILN_URL_SIGNING_KEY`
        : 'KILN_URL_SIGNING_KEY',
    );
    throw new ConfigError(`invalid configuration:\n${[...new Set(names)].map((n) => `  ${n}: required`).join('\n')}`);
  }
  return signer;
}
