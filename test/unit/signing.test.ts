/** Purpose-specific signing keys: what one key signs never passes for another purpose. */
import { createHmac } from 'node:crypto';
import { ConfigError } from '../../lib/config';
import { fileRef, renderFileRefs, signedFileUrl, verifyFileUrl } from '../../lib/file-urls';
import { purposeKey, UrlSigner, urlSignerFromConfig } from '../../lib/signing';

const root = 'r'.repeat(64);
const id = 'abcdefghijklmnopqrstuvwxyz';
const rawHmac = (key: string | Buffer, subject: string) => createHmac('sha256', key).update(subject).digest('base64url').slice(0, 32);

test('each purpose has its own key, derived from the root, none of them the root', () => {
  const keys = (['stream', 'file', 'ref', 'other'] as const).map((p) => purposeKey(root, p).toString('hex'));
  expect(new Set(keys).size).toBe(4);
  expect(keys).not.toContain(Buffer.from(root).toString('hex'));
  expect(purposeKey(root, 'stream').equals(purposeKey(root, 'stream'))).toBe(true);
  expect(purposeKey('s'.repeat(64), 'stream').equals(purposeKey(root, 'stream'))).toBe(false);
});

test('a stream signature does not verify as a file signature, nor the other way round', () => {
  const full = new UrlSigner(root);
  const stream = UrlSigner.forPurpose(root, 'stream');
  const file = UrlSigner.forPurpose(root, 'file');
  const subject = `stream:${id}`;
  expect(full.verify(subject, stream.sign(subject))).toBe(true);
  // The file key over the same subject, as a process holding only the file key could make it.
  expect(full.verify(subject, rawHmac(purposeKey(root, 'file'), subject))).toBe(false);
  expect(full.verify(`file:${id}:1`, rawHmac(purposeKey(root, 'stream'), `file:${id}:1`))).toBe(false);
  expect(full.verify(subject, rawHmac(root, subject))).toBe(false);
  expect(() => file.sign(subject)).toThrow(/no key for stream/);
});

test("an engine's signer (file and ref keys only) works with the API's for files, and signs nothing else", () => {
  const api = new UrlSigner(root);
  const engine = urlSignerFromConfig(
    { KILN_FILE_URL_KEY: purposeKey(root, 'file').toString('hex'), KILN_FILE_REF_KEY: purposeKey(root, 'ref').toString('hex') },
    ['file', 'ref'],
  );
  const rendered = renderFileRefs({ image: fileRef(engine, id) }, 'http://h', api);
  const url = new URL(rendered.image);
  expect(verifyFileUrl(engine, id, url.searchParams.get('expires'), url.searchParams.get('sig'))).toBe(true);
  expect(verifyFileUrl(api, id, url.searchParams.get('expires'), url.searchParams.get('sig'))).toBe(true);
  expect(new URL(signedFileUrl('http://h', engine, id)).searchParams.get('sig')).toBe(
    new URL(signedFileUrl('http://h', api, id)).searchParams.get('sig'),
  );
  expect(() => engine.sign(`stream:${id}`)).toThrow(/no key for stream/);
  expect(() => engine.sign(`anything:${id}`)).toThrow(/no key for other/);
});

test('file references signed with the root before purpose keys still render', () => {
  const legacy = `kiln-file:${id}.${rawHmac(root, `ref:${id}`)}`;
  expect(renderFileRefs(legacy, 'http://h', new UrlSigner(root))).toMatch(/^http:\/\/h\/v1\/files\//);
  expect(renderFileRefs(legacy, 'http://h', UrlSigner.forPurpose(root, 'ref'))).toBe(legacy);
});

test('a process missing a key it needs stops at start, naming the variable', () => {
  expect(() => urlSignerFromConfig({}, ['file', 'ref'])).toThrow(ConfigError);
  expect(() => urlSignerFromConfig({ KILN_FILE_URL_KEY: 'a'.repeat(64) }, ['file', 'ref'])).toThrow(/KILN_FILE_REF_KEY/);
  expect(() => urlSignerFromConfig({ KILN_FILE_URL_KEY: 'a'.repeat(64), KILN_FILE_REF_KEY: 'b'.repeat(64) }, ['stream'])).toThrow(
    /KILN_URL_SIGNING_KEY/,
  );
  expect(urlSignerFromConfig({ KILN_URL_SIGNING_KEY: root }, ['stream', 'file', 'ref']).has('stream')).toBe(true);
});
