/**
 * Input fetches connect to the address that was checked and check every redirect hop: the
 * defence against DNS rebinding and redirects into Kiln's own network (issue 15, point 2).
 * The servers are real, on loopback; loopback is let through by `allowAddresses` only where a
 * test says so, as an operator would for an internal host.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type FetchInputDeps, fetchInput, MAX_REDIRECTS } from '../../lib/fetch-input';
import type { HostLookup } from '../../lib/webhook-target';

interface Server {
  port: number;
  hosts: string[];
  close: () => Promise<void>;
}

async function serve(
  address: string,
  handler: (req: http.IncomingMessage, res: http.ServerResponse, port: number) => void,
): Promise<Server> {
  const hosts: string[] = [];
  let port = 0;
  const server = http.createServer((req, res) => {
    hosts.push(req.headers.host ?? '');
    handler(req, res, port);
  });
  await new Promise<void>((resolve) => server.listen(0, address, resolve));
  port = (server.address() as AddressInfo).port;
  return { port, hosts, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

const deps = (extra: Partial<FetchInputDeps> = {}): FetchInputDeps =>
  ({ storage: undefined, signer: undefined, allowPrivate: false, maxBytes: 1024, timeoutMs: 5_000, ...extra }) as unknown as FetchInputDeps;

let origin: Server;
let other: Server;

beforeAll(async () => {
  // A second loopback address that nothing is allowed to reach: it counts what arrives anyway.
  other = await serve('127.0.0.2', (_req, res) => res.end('inside'));
  origin = await serve('127.0.0.1', (req, res, port) => {
    const to = (location: string) => res.writeHead(302, { location }).end();
    if (req.url === '/image') res.writeHead(200, { 'content-type': 'image/png' }).end('png bytes');
    else if (req.url === '/hop') to('/image');
    else if (req.url === '/to-other-loopback') to(`http://127.0.0.2:${other.port}/secret`);
    else if (req.url === '/to-metadata') to('http://169.254.169.254/latest/meta-data/');
    else if (req.url === '/to-nat64') to(`http://[64:ff9b::7f00:2]:${other.port}/secret`);
    else if (req.url === '/to-name') to(`http://internal.example:${port}/image`);
    else if (req.url === '/loop') to('/loop');
    else res.writeHead(404).end();
  });
});

afterAll(async () => {
  await origin.close();
  await other.close();
});

describe('pinning', () => {
  test('the fetch connects to the address that was checked, not to a later DNS answer', async () => {
    const answers: string[] = [];
    // First answer: the vetted address. Any later one: an address nothing listens on. Were the
    // name resolved again at connect time, the fetch would fail (or go elsewhere).
    const lookup: HostLookup = async () => {
      const address = answers.length === 0 ? '127.0.0.1' : '127.0.0.3';
      answers.push(address);
      return [{ address, family: 4 }];
    };
    const before = origin.hosts.length;
    const got = await fetchInput(`http://rebind.invalid:${origin.port}/image`, deps({ lookup, allowAddresses: ['127.0.0.1'] }));
    expect(got).toEqual({ bytes: Buffer.from('png bytes'), contentType: 'image/png' });
    expect(answers).toEqual(['127.0.0.1']);
    // The request reached the vetted server, under the name the URL gave.
    expect(origin.hosts.slice(before)).toEqual([`rebind.invalid:${origin.port}`]);
  });

  test('a name that resolves to a private address is refused before any connection', async () => {
    const lookup: HostLookup = async () => [{ address: '10.0.0.7', family: 4 }];
    await expect(fetchInput('http://intranet.invalid/image', deps({ lookup }))).rejects.toThrow(
      /the URL resolves to 10\.0\.0\.7, a private or loopback address/,
    );
  });
});

describe('redirects', () => {
  const allowed = () => deps({ allowAddresses: ['127.0.0.1'] });

  test('a redirect to an allowed address is followed', async () => {
    await expect(fetchInput(`http://127.0.0.1:${origin.port}/hop`, allowed())).resolves.toMatchObject({ bytes: Buffer.from('png bytes') });
  });

  test.each([
    ['/to-other-loopback', /redirect to http:\/\/127\.0\.0\.2:\d+\/secret resolves to 127\.0\.0\.2, a private or loopback address/],
    ['/to-metadata', /redirect to http:\/\/169\.254\.169\.254\/latest\/meta-data\/ resolves to 169\.254\.169\.254/],
    ['/to-nat64', /redirect to http:\/\/\[64:ff9b::7f00:2\]:\d+\/secret resolves to 64:ff9b::7f00:2/],
  ])('a redirect into the private network (%s) is refused, and nothing reaches it', async (path, message) => {
    const before = other.hosts.length;
    await expect(fetchInput(`http://127.0.0.1:${origin.port}${path}`, allowed())).rejects.toThrow(message);
    expect(other.hosts.length).toBe(before);
  });

  test('each hop resolves its own name under the same rules', async () => {
    const lookup: HostLookup = async (host) => [{ address: host === 'internal.example' ? '192.168.0.10' : '127.0.0.1', family: 4 }];
    await expect(fetchInput(`http://127.0.0.1:${origin.port}/to-name`, deps({ lookup, allowAddresses: ['127.0.0.1'] }))).rejects.toThrow(
      /redirect to http:\/\/internal\.example:\d+\/image resolves to 192\.168\.0\.10/,
    );
  });

  test(`more than ${MAX_REDIRECTS} redirects are refused`, async () => {
    await expect(fetchInput(`http://127.0.0.1:${origin.port}/loop`, allowed())).rejects.toThrow(`more than ${MAX_REDIRECTS} redirects`);
  });
});

test('the size limit holds over the network', async () => {
  await expect(fetchInput(`http://127.0.0.1:${origin.port}/image`, deps({ allowAddresses: ['127.0.0.1'], maxBytes: 4 }))).rejects.toThrow(
    /limit 4|larger than 4/,
  );
});
