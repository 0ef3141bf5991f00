/** The base of absolute URLs comes from configuration: KILN_PUBLIC_URL, else the listen address. */
import { publicBaseUrl } from '../../lib/public-url';

test('KILN_PUBLIC_URL wins, without a trailing slash', () => {
  expect(publicBaseUrl({ KILN_PUBLIC_URL: 'https://kiln.example.com/', HOST: '0.0.0.0', PORT: 8080 })).toBe('https://kiln.example.com');
});

test('unset: the listen address, with wildcards as loopback and IPv6 in brackets', () => {
  expect(publicBaseUrl({ HOST: '127.0.0.1', PORT: 8091 })).toBe('http://127.0.0.1:8091');
  expect(publicBaseUrl({ HOST: '0.0.0.0', PORT: 8080 })).toBe('http://127.0.0.1:8080');
  expect(publicBaseUrl({ HOST: '::', PORT: 8080 })).toBe('http://[::1]:8080');
  expect(publicBaseUrl({ HOST: 'fd00::5', PORT: 80 })).toBe('http://[fd00::5]:80');
  expect(publicBaseUrl({ HOST: 'api.internal', PORT: 8080 })).toBe('http://api.internal:8080');
});
