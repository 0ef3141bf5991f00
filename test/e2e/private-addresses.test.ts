/**
 * Refusal of private and loopback addresses, which the suite's own stack turns off
 * (KILN_WEBHOOK_ALLOW_PRIVATE=true, KILN_FETCH_ALLOW_PRIVATE=true) so that its receivers can
 * listen on loopback. Here they are on, as in production:
 * - webhook URLs and batch `input_url`s are checked by the API: an API app with both refusals
 *   on, against the real stack, answers 422 naming the field, and nothing is called or started;
 *   the suite's API, with them off, takes the same requests, so the setting is what refuses;
 * - input URLs of a prediction (remove-background's `image`) are fetched by the engine: a
 *   second engine node, a real process with KILN_FETCH_ALLOW_PRIVATE=false, takes a fresh
 *   version of the model, and its prediction fails without a request reaching the server.
 */
import type { ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { createApp } from '../../api/app';
import { EventHub } from '../../api/event-hub';
import { closeDb, type Db, listenClient } from '../../db/client';
import { addVersion, resolveModelVersion, upsertModel } from '../../db/models';
import { removeNode } from '../../db/nodes';
import { config } from '../../lib/config';
import { newId } from '../../lib/ids';
import { createLogger } from '../../lib/logger';
import { publicBaseUrl } from '../../lib/public-url';
import { secretBoxFromConfig } from '../../lib/secret-box';
import { urlSignerFromConfig } from '../../lib/signing';
import { Storage } from '../../lib/storage';
import { api, newAccount, poll, TERMINAL, TEST_DATABASE_URL, testDb } from '../helpers';
import { startEngineNode } from '../processes';
import { type Receiver, startReceiver } from '../receiver';
import { testDataConverter } from '../temporal';

jest.setTimeout(180_000);

let db: Db;
let me: Awaited<ReturnType<typeof newAccount>>;

/** An HTTP server on loopback that records every request and answers with `body`. */
async function startFileServer(body: Buffer, contentType: string) {
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': contentType }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

beforeAll(async () => {
  db = testDb();
  me = await newAccount(db, 'private-addr');
});
afterAll(() => closeDb(db));

describe('the API refuses private webhook and input URLs', () => {
  let strict: http.Server;
  let strictUrl: string;
  let connection: Connection;
  let hub: EventHub;
  let files: Awaited<ReturnType<typeof startFileServer>>;
  let rx: Receiver | undefined;

  beforeAll(async () => {
    connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' });
    const logger = createLogger('test-api', 'silent');
    hub = new EventHub(db.$client, logger, () => listenClient(TEST_DATABASE_URL));
    await hub.start();
    const c = config();
    const app = createApp({
      db,
      temporal: new Client({ connection, namespace: c.TEMPORAL_NAMESPACE, dataConverter: testDataConverter() }),
      logger,
      hub,
      signer: urlSignerFromConfig(c, ['stream', 'file', 'ref']),
      secrets: secretBoxFromConfig(c),
      controlQueue: c.KILN_CONTROL_QUEUE,
      allowPrivateWebhooks: false,
      storage: Storage.fromConfig(c),
      publicUrl: publicBaseUrl(c),
      fetch: { allowPrivate: false, maxBytes: c.KILN_FETCH_MAX_BYTES, timeoutMs: c.KILN_FETCH_TIMEOUT_MS },
    });
    strict = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => strict.once('listening', resolve));
    strictUrl = `http://127.0.0.1:${(strict.address() as AddressInfo).port}`;
    files = await startFileServer(Buffer.from('{"prompt":"a","max_tokens":1}\n{"prompt":"b","max_tokens":1}\n'), 'application/x-ndjson');
  });
  afterAll(async () => {
    strict.closeAllConnections();
    await new Promise((resolve) => strict.close(resolve));
    await hub.stop();
    await connection.close();
    await files.close();
    await rx?.close();
  });

  const viaStrict = async (path: string, body: unknown) => {
    const res = await fetch(`${strictUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${me.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  test('a webhook to a private, loopback or link-local address is 422 on `webhook`, and nothing starts', async () => {
    rx = await startReceiver();
    const hooks = [
      `http://127.0.0.1:${rx.port}/hook`,
      `http://localhost:${rx.port}/hook`,
      `http://[::1]:${rx.port}/hook`,
      `http://[::ffff:127.0.0.1]:${rx.port}/hook`,
      'http://10.1.2.3/hook',
      'http://172.16.0.1/hook',
      'http://192.168.1.1/hook',
      'http://169.254.169.254/latest/meta-data/',
      'http://0.0.0.0/hook',
    ];
    for (const webhook of hooks) {
      for (const [path, body] of [
        ['/v1/models/kiln/tiny-llama/predictions', { input: { prompt: 'x', max_tokens: 1 }, webhook }],
        ['/v1/predictions', { version: 'kiln/tiny-llama', input: { prompt: 'x', max_tokens: 1 }, webhook }],
      ] as const) {
        const r = await viaStrict(path, body);
        expect({ webhook, path, status: r.status }).toEqual({ webhook, path, status: 422 });
        expect(r.body.invalid_fields[0].field).toBe('webhook');
        expect(r.body.detail).toMatch(/private|loopback|internal|link-local|reserved/i);
      }
    }
    expect((await api('/v1/predictions', { token: me.token })).body.results).toEqual([]);
    expect(rx.received).toEqual([]);
    // The suite's API, which allows private addresses, takes the same webhook, and calls it.
    const allowed = await api('/v1/models/kiln/tiny-llama/predictions', {
      token: me.token,
      body: { input: { prompt: 'x', max_tokens: 1 }, webhook: hooks[0], webhook_events_filter: ['completed'] },
    });
    expect(allowed.status).toBe(201);
    const [hook] = await poll(
      async () => rx!.received,
      (r) => r.length > 0,
    );
    expect(hook.json.id).toBe(allowed.body.id);
  });

  test("a batch's input_url on a private address is 422 on `input_url`, and the URL is never fetched", async () => {
    const input_url = `http://127.0.0.1:${files.port}/inputs.jsonl`;
    for (const url of [input_url, `http://localhost:${files.port}/inputs.jsonl`, 'http://10.1.2.3/inputs.jsonl']) {
      const r = await viaStrict('/v1/batches', { version: 'kiln/tiny-llama', input_url: url });
      expect({ url, status: r.status }).toEqual({ url, status: 422 });
      expect(r.body.invalid_fields[0].field).toBe('input_url');
      expect(r.body.detail).toMatch(/private|loopback|internal|link-local|reserved/i);
    }
    expect(files.requests).toEqual([]);
    // Allowed, the same URL is fetched and the batch is made.
    const allowed = await api('/v1/batches', { token: me.token, body: { version: 'kiln/tiny-llama', input_url } });
    expect(allowed.status).toBe(201);
    expect(files.requests).toEqual(['GET /inputs.jsonl']);
  });
});

describe('the engine refuses private input URLs', () => {
  const NODE = `test-strict-fetch-node-${process.pid}`;
  let node: ChildProcess | undefined;
  let image: Awaited<ReturnType<typeof startFileServer>>;

  beforeAll(async () => {
    // A 1×1 PNG: never fetched, but a real image were it fetched.
    image = await startFileServer(
      Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64'),
      'image/png',
    );
  });
  afterAll(async () => {
    node?.kill('SIGKILL');
    await removeNode(db, NODE).catch(() => undefined);
    await image.close();
  });

  test('a prediction whose image is on loopback fails on a node that refuses private addresses, and the image server hears nothing', async () => {
    const seeded = (await resolveModelVersion(db, me.account.id, { owner: 'kiln', name: 'remove-background' }))!.version;
    // A model of its own (same weights): no node serves it, so placement picks a node for it.
    const name = `cutout-${newId().slice(0, 10)}`;
    const model = await upsertModel(db, {
      ownerId: me.account.id,
      owner: me.account.username,
      name,
      task: 'remove-background',
      visibility: 'private',
    });
    const version = await addVersion(db, model, {
      task: 'remove-background',
      engine: 'onnxruntime',
      files: seeded.files,
      memoryBytes: seeded.memoryBytes,
      settings: seeded.settings,
    });
    // Room for exactly this version: the best fit of every node, so it is placed there.
    node = await startEngineNode(NODE, Math.ceil(version.memoryBytes / 2 ** 20), { KILN_FETCH_ALLOW_PRIVATE: 'false' });

    const created = await api(`/v1/models/${me.account.username}/${name}/predictions`, {
      token: me.token,
      body: { input: { image: `http://127.0.0.1:${image.port}/disc.png` } },
    });
    expect(created.status).toBe(201);
    const done = await poll(
      () => api(`/v1/predictions/${created.body.id}`, { token: me.token }),
      (r) => TERMINAL.includes(r.body.status),
      { timeoutMs: 120_000, intervalMs: 250 },
    );
    expect(done.body.status).toBe('failed');
    expect(done.body.logs).toContain(`on node ${NODE}`);
    expect(done.body.error).toMatch(/image: .*(private|loopback|internal|link-local|reserved)/i);
    expect(image.requests).toEqual([]);
  });
});
