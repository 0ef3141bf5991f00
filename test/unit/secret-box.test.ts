/** Stored secrets sealed with AES-256-GCM under a key from the environment, with key rotation. */
import { randomBytes } from 'node:crypto';
import { SecretBox, secretBoxFromConfig } from '../../lib/secret-box';

const k1 = randomBytes(32);
const k2 = randomBytes(32);
const secret = `whsec_${randomBytes(32).toString('base64')}`;

test('a sealed secret carries a version and key id, not the plaintext, and opens again', () => {
  const box = new SecretBox(k1);
  const sealed = box.seal(secret);
  expect(sealed).toMatch(/^kiln-sealed:v1:[0-9a-f]{12}:/);
  expect(sealed).not.toContain(secret.slice(6));
  expect(box.seal(secret)).not.toBe(sealed);
  expect(box.open(sealed)).toBe(secret);
  expect(box.needsReseal(sealed)).toBe(false);
});

test('tampering or the wrong key is an error, never a wrong secret', () => {
  const sealed = new SecretBox(k1).seal(secret);
  // The ciphertext's last character may carry unused bits; the one before it is all data, and it is
  // always changed (to 'A' or, where it is 'A' already, 'B').
  const flipped = sealed.slice(0, -2) + (sealed.at(-2) === 'A' ? 'B' : 'A') + sealed.slice(-1);
  expect(() => new SecretBox(k1).open(flipped)).toThrow(/does not open/);
  expect(() => new SecretBox(k2).open(sealed)).toThrow(/does not hold/);
});

test('rotation: the new box opens what the old key sealed and says it needs resealing', () => {
  const old = new SecretBox(k1).seal(secret);
  const box = new SecretBox(k2, [k1]);
  expect(box.open(old)).toBe(secret);
  expect(box.needsReseal(old)).toBe(true);
  const resealed = box.seal(box.open(old));
  expect(box.needsReseal(resealed)).toBe(false);
  expect(new SecretBox(k2).open(resealed)).toBe(secret);
});

test('plaintext rows from before sealing still open and need sealing', () => {
  const box = new SecretBox(k1);
  expect(box.open(secret)).toBe(secret);
  expect(box.needsReseal(secret)).toBe(true);
});

test('the box comes from KILN_SECRETS_KEY and KILN_SECRETS_PREVIOUS_KEYS', () => {
  expect(() => secretBoxFromConfig({})).toThrow(/KILN_SECRETS_KEY/);
  const box = secretBoxFromConfig({ KILN_SECRETS_KEY: k2.toString('hex'), KILN_SECRETS_PREVIOUS_KEYS: ` ${k1.toString('hex')} ` });
  expect(box.open(new SecretBox(k1).seal(secret))).toBe(secret);
});
