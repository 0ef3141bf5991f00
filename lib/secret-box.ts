/**
 * Secrets kept in the database (webhook signing secrets) are sealed with AES-256-GCM under a key
 * from the environment, so a leaked dump or backup, or a role that may read the table, learns
 * nothing. A sealed value names its format and its key: `kiln-sealed:v1:<key id>:<iv.tag.data>`,
 * so keys can rotate: values under an older key still open while it is listed among the previous
 * keys, and `reseal` moves them to the current one.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { type Config, ConfigError } from './config';
import { KilnError } from './kiln-error';

const PREFIX = 'kiln-sealed:v1:';

export class SecretBoxError extends KilnError {}

/** A short public name of a key (not the key): which key sealed a value. */
const keyId = (key: Buffer) => createHash('sha256').update('kiln secret box key id').update(key).digest('hex').slice(0, 12);

export class SecretBox {
  private readonly current: { id: string; key: Buffer };
  private readonly keys = new Map<string, Buffer>();

  /** `current` seals; it and `previous` open. Keys are 32 bytes. */
  constructor(current: Buffer, previous: Buffer[] = []) {
    for (const key of [current, ...previous]) {
      if (key.length !== 32) throw new SecretBoxError('a secret box key is 32 bytes');
      this.keys.set(keyId(key), key);
    }
    this.current = { id: keyId(current), key: current };
  }

  static isSealed(value: string): boolean {
    return value.startsWith(PREFIX);
  }

  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.current.key, iv);
    const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const parts = [iv, cipher.getAuthTag(), data].map((b) => b.toString('base64url'));
    return `${PREFIX}${this.current.id}:${parts.join('.')}`;
  }

  /**
   * The plaintext of a sealed value. A value that is not sealed is returned as it is: rows written
   * before sealing existed, until setup seals them.
   */
  open(value: string): string {
    if (!SecretBox.isSealed(value)) return value;
    const [id, body] = value.slice(PREFIX.length).split(':');
    const key = this.keys.get(id);
    if (!key)
      throw new SecretBoxError(`a stored secret is sealed under key ${id}, which this process does not hold (KILN_SECRETS_PREVIOUS_KEYS?)`);
    const [iv, tag, data] = (body ?? '').split('.').map((p) => Buffer.from(p, 'base64url'));
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, iv);
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(data), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretBoxError(`a stored secret under key ${id} does not open (corrupt or tampered with)`);
    }
  }

  /** True when the value is plaintext or sealed under a key other than the current one. */
  needsReseal(value: string): boolean {
    return !value.startsWith(`${PREFIX}${this.current.id}:`);
  }
}

/** The box of a process that reads or writes stored secrets; stops it at start if the key is missing. */
export function secretBoxFromConfig(c: Pick<Config, 'KILN_SECRETS_KEY' | 'KILN_SECRETS_PREVIOUS_KEYS'>): SecretBox {
  if (!c.KILN_SECRETS_KEY) throw new ConfigError('invalid configuration:\n  KILN_SECRETS_KEY: required');
  const previous = (c.KILN_SECRETS_PREVIOUS_KEYS ?? '')
    .split(',')
    .map((k) => k.trim())
    .filter(Boolean)
    .map((k) => Buffer.from(k, 'hex'));
  return new SecretBox(Buffer.from(c.KILN_SECRETS_KEY, 'hex'), previous);
}
