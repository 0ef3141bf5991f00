import { retryAfterMs } from '../../activities/webhooks';
import { parseCancelAfter } from '../../api/prediction-request';
import { parseDurationList } from '../../lib/duration';
import { fileRef, renderFileRefs, verifyFileUrl } from '../../lib/file-urls';
import { UrlSigner } from '../../lib/signing';
import { isInternalAddress, resolveWebhookTarget } from '../../lib/webhook-target';

describe('webhook targets in production (private addresses refused)', () => {
  test.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.20.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '::1',
    'fe80::1',
    'fd00::1',
    '::ffff:127.0.0.1',
  ])('%s is internal', (address) => expect(isInternalAddress(address)).toBe(true));

  test.each(['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946', '8.8.8.8'])('%s is public', (address) =>
    expect(isInternalAddress(address)).toBe(false),
  );

  // IPv6 forms that carry an IPv4 address, and special-purpose ranges (RFC 6890's registries).
  test.each([
    ['::ffff:7f00:1', 'IPv4-mapped, in hex'],
    ['::ffff:a9fe:a9fe', 'IPv4-mapped metadata address'],
    ['::127.0.0.1', 'IPv4-compatible'],
    ['::ffff:0:7f00:1', 'SIIT IPv4-translated'],
    ['64:ff9b::7f00:1', 'NAT64 to loopback'],
    ['64:ff9b::10.0.0.1', 'NAT64 to a private network'],
    ['64:ff9b::a9fe:a9fe', 'NAT64 to the metadata address'],
    ['64:ff9b:1::808:808', 'local-use NAT64'],
    ['2002:7f00:1::1', '6to4 of loopback'],
    ['2002:c0a8:101::1', '6to4 of 192.168.1.1'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo'],
    ['2001:2::1', 'benchmarking'],
    ['2001:db8::1', 'documentation'],
    ['100::1', 'discard'],
    ['fec0::1', 'site-local'],
    ['fe80::1%eth0', 'link-local with a zone'],
    ['192.88.99.1', '6to4 relay anycast'],
    ['192.0.2.1', 'documentation'],
    ['255.255.255.255', 'broadcast'],
    ['not-an-address', 'not an address'],
  ])('%s is internal (%s)', (address) => expect(isInternalAddress(address)).toBe(true));

  test.each(['::ffff:8.8.8.8', '::ffff:808:808', '64:ff9b::808:808', '2002:808:808::1', '2606:4700:4700::1111', '1.1.1.1'])(
    '%s is public',
    (address) => expect(isInternalAddress(address)).toBe(false),
  );

  test('URLs with IPv6 literals that reach inside are refused', async () => {
    for (const url of [
      'http://[64:ff9b::7f00:1]/',
      'http://[2002:a9fe:a9fe::1]/',
      'http://[::ffff:127.0.0.1]/',
      'http://[2001::1]/',
      'http://0x7f.1/',
      'http://2130706433/',
    ]) {
      await expect(resolveWebhookTarget(url, false)).rejects.toThrow(/private or loopback/);
    }
  });

  test('loopback URLs are refused unless allowed', async () => {
    await expect(resolveWebhookTarget('http://127.0.0.1:8080/hook', false)).rejects.toThrow(/private or loopback/);
    await expect(resolveWebhookTarget('http://[::1]/hook', false)).rejects.toThrow(/private or loopback/);
    await expect(resolveWebhookTarget('http://localhost/hook', false)).rejects.toThrow(/private or loopback/);
    await expect(resolveWebhookTarget('http://127.0.0.1:8080/hook', true)).resolves.toMatchObject({ address: '127.0.0.1' });
    await expect(resolveWebhookTarget('https://93.184.216.34/hook', false)).resolves.toMatchObject({ family: 4 });
  });

  test('only http(s) without credentials', async () => {
    await expect(resolveWebhookTarget('ftp://93.184.216.34/x', true)).rejects.toThrow(/http or https/);
    await expect(resolveWebhookTarget('https://u:p@93.184.216.34/x', true)).rejects.toThrow(/credentials/);
    await expect(resolveWebhookTarget('not a url', true)).rejects.toThrow(/valid URL/);
  });
});

describe('retry timing', () => {
  test('the schedule parses to milliseconds', () => {
    expect(parseDurationList('5s,5m,30m,2h')).toEqual([5000, 300000, 1800000, 7200000]);
    expect(parseDurationList('250ms')).toEqual([250]);
  });

  test('Retry-After in seconds or as a date, capped at a day', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterMs('120', now)).toBe(120_000);
    expect(retryAfterMs('Thu, 01 Jan 2026 00:01:00 GMT', now)).toBe(60_000);
    expect(retryAfterMs('999999', now)).toBe(24 * 3600 * 1000);
    expect(retryAfterMs('soon', now)).toBeUndefined();
    expect(retryAfterMs(undefined, now)).toBeUndefined();
  });
});

describe('Cancel-After', () => {
  test.each([
    ['30', 30],
    ['90s', 90],
    ['5m', 300],
    ['1h30m', 5400],
    ['2.5s', undefined],
  ])('%s', (header, seconds) => {
    if (seconds === undefined) expect(() => parseCancelAfter(header)).toThrow(/Cancel-After/);
    else expect(parseCancelAfter(header)).toBe(seconds);
  });

  test('too short, too long, or junk is a 422 naming the header', () => {
    for (const h of ['1s', '3', '48h', 'soon', '']) expect(() => parseCancelAfter(h)).toThrow(/Cancel-After/);
    expect(parseCancelAfter(undefined)).toBeUndefined();
  });
});

describe('file references and URLs', () => {
  test('only references Kiln signed become URLs, and URLs expire', () => {
    const signer = new UrlSigner('k'.repeat(32));
    const id = 'abcdefghijklmnopqrstuvwxyz';
    const out = renderFileRefs({ image: fileRef(signer, id), text: `kiln-file:${id}.forged` }, 'http://h', signer);
    expect(out.text).toBe(`kiln-file:${id}.forged`);
    const url = new URL(out.image);
    expect(url.pathname).toBe(`/v1/files/${id}/content`);
    const expires = url.searchParams.get('expires');
    expect(verifyFileUrl(signer, id, expires, url.searchParams.get('sig'))).toBe(true);
    expect(verifyFileUrl(signer, id, expires, url.searchParams.get('sig'), (Number(expires) + 1) * 1000)).toBe(false);
    expect(verifyFileUrl(signer, 'other'.padEnd(26, 'a'), expires, url.searchParams.get('sig'))).toBe(false);
  });
});
