/**
 * SSRF through the HTTP API (issue 15, point 2): a batch's `input_url` is fetched from the
 * address that was checked, and every redirect is checked again. The suite's own API lets
 * private addresses through (its test servers are on loopback), so this test mounts a second
 * API over the same database, Temporal and storage that refuses them, with 127.0.0.1 let through
 * as an operator would let an internal host, and a resolver of its own that answers differently
 * the second time it is asked, as a rebinding DNS server would.
 */
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { createApp } from '../../api/app';
import { EventHub } from '../../api/event-hub';
import { closeDb, type Db, listenClient } from '../../db/client';
import { config } from '../../lib/config';
import { createLogger } from '../../lib/logger';
import { secretBoxFromConfig } from '../../lib/secret-box';
import { UrlSigner } from '../../lib/signing';
import { Storage } from '../../lib/storage';
import type { HostLookup } from '../../lib/webhook-target';
import { api, newAccount, poll, TEST_DATABASE_URL, testDb } from '../helpers';
import { testDataConverter } from '../temporal';

jest.setTimeout(120_000);

const JSONL = `${JSON.stringify({ text: 'one' })}\n${JSON.stringify({ text: 'two' })}\n`;

let db: Db;
let token: string;
let connection: Connection;
let hub: EventHub;
let kiln: Server;
let kilnUrl: string;
/** Inputs server on 127.0.0.1, and one on 127.0.0.2 that nothing may reach. */
let inputs: Server;
let inside: Server;
let inputsPort: number;
let insidePort: number;
const seen = { inputs: [] as string[], inside: [] as string[] };
/** What the second API's resolver answered, in order. */
const answers: string[] = [];

const listen = async (server: Server, address: string) => {
  server.listen(0, address);
  await new Promise((resolve) => server.once('listening', resolve));
  return (server.address() as AddressInfo).port;
};

// First answer for a name: the inputs server. Any later one: the address nothing may reach.
const rebindingLookup: HostLookup = async () => {
  const address = answers.length === 0 ? '127.0.0.1' : '127.0.0.2';
  answers.push(address);
  return [{ address, family: 4 }];
};

beforeAll(async () => {
  db = testDb();
  token = (await newAccount(db, 'ssrf')).token;
  inside = http.createServer((req, res) => {
    seen.inside.push(`${req.headers.host}${req.url}`);
    res.end(JSONL);
  });
  insidePort = await listen(inside, '127.0.0.2');
  inputs = http.createServer((req, res) => {
    seen.inputs.push(`${req.headers.host}${req.url}`);
    if (req.url === '/inputs.jsonl') res.end(JSONL);
    else if (req.url === '/moved') res.writeHead(301, { location: '/inputs.jsonl' }).end();
    else if (req.url === '/to-inside') res.writeHead(302, { location: `http://127.0.0.2:${insidePort}/inputs.jsonl` }).end();
    else if (req.url === '/to-nat64') res.writeHead(307, { location: `http://[64:ff9b::7f00:2]:${insidePort}/inputs.jsonl` }).end();
    else res.writeHead(404).end();
  });
  inputsPort = await listen(inputs, '127.0.0.1');

  connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' });
  const logger = createLogger('test-api', 'silent');
  hub = new EventHub(db.$client, logger, () => listenClient(TEST_DATABASE_URL));
  await hub.start();
  const app = createApp({
    db,
    temporal: new Client({ connection, namespace: process.env.TEMPORAL_NAMESPACE ?? 'kiln-test', dataConverter: testDataConverter() }),
    logger,
    hub,
    signer: new UrlSigner(process.env.KILN_URL_SIGNING_KEY!),
    controlQueue: process.env.KILN_CONTROL_QUEUE ?? 'kiln-control',
    allowPrivateWebhooks: false,
    storage: Storage.fromConfig(config()),
    // Only the batch's own JSON holds URLs of this API; the test reads none of them.
    publicUrl: 'http://127.0.0.1',
    secrets: secretBoxFromConfig(config()),
    fetch: { allowPrivate: false, maxBytes: 2 ** 20, timeoutMs: 10_000, allowAddresses: ['127.0.0.1'], lookup: rebindingLookup },
  });
  kiln = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => kiln.once('listening', resolve));
  kilnUrl = `http://127.0.0.1:${(kiln.address() as AddressInfo).port}`;
});

afterAll(async () => {
  kiln.closeAllConnections();
  await new Promise((resolve) => kiln.close(resolve));
  await hub.stop();
  await connection.close();
  await new Promise((resolve) => inputs.close(resolve));
  await new Promise((resolve) => inside.close(resolve));
  await closeDb(db);
});

const batch = async (inputUrl: string) => {
  const res = await fetch(`${kilnUrl}/v1/batches`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ version: 'kiln/echo-fixture', input_url: inputUrl }),
  });
  return { status: res.status, body: (await res.json()) as any };
};

test('a name is resolved once and the fetch connects to that address, whatever DNS says next', async () => {
  const r = await batch(`http://inputs.rebind.test:${inputsPort}/inputs.jsonl`);
  expect(r.status).toBe(201);
  expect(r.body.total).toBe(2);
  expect(answers).toEqual(['127.0.0.1']);
  expect(seen.inputs).toContain(`inputs.rebind.test:${inputsPort}/inputs.jsonl`);
  expect(seen.inside).toEqual([]);
  // Let the two echo inputs finish, so the test leaves nothing running.
  await poll(
    () => api(`/v1/batches/${r.body.id}`, { token }),
    (b) => ['succeeded', 'failed', 'canceled'].includes(b.body.status),
    { timeoutMs: 60_000 },
  );
});

test('a redirect is followed, and checked again: into the private network it is a 422 naming input_url', async () => {
  const moved = await batch(`http://127.0.0.1:${inputsPort}/moved`);
  expect(moved.status).toBe(201);
  await api(`/v1/batches/${moved.body.id}/cancel`, { token, method: 'POST' });

  for (const [path, address] of [
    ['/to-inside', '127.0.0.2'],
    ['/to-nat64', '64:ff9b::7f00:2'],
  ]) {
    const r = await batch(`http://127.0.0.1:${inputsPort}${path}`);
    expect(r.status).toBe(422);
    expect(r.body.invalid_fields).toEqual([
      expect.objectContaining({
        field: 'input_url',
        description: expect.stringContaining(`resolves to ${address}, a private or loopback address`),
      }),
    ]);
    expect(r.body.detail).toMatch(/^input_url: the redirect to http:\/\//);
  }
  expect(seen.inside).toEqual([]);
});
