/**
 * Storage.readInto against the real MinIO: an object's bytes through one reused buffer on a plain
 * socket (lib/object-read-into.ts), and through the SDK's stream where that is not allowed; the
 * store's errors, a cut connection and an abort end the read with an error, never a short success.
 */
import { createHash, randomBytes } from 'node:crypto';
import { S3Client } from '@aws-sdk/client-s3';
import { config } from '../../lib/config';
import { canReadInto, ObjectReadError } from '../../lib/object-read-into';
import { Storage } from '../../lib/storage';
import { startTcpProxy, type TcpProxy } from '../tcp-proxy';

jest.setTimeout(60_000);

const MiB = 2 ** 20;
const storage = Storage.fromConfig(config());
const prefix = `test/read-into-${Date.now()}`;
let blob: Buffer;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

beforeAll(async () => {
  await storage.ensureBucket();
  // Not a whole number of the reader's 256 KiB reads.
  blob = randomBytes(5 * MiB + 12_345);
  await storage.putBytes(`${prefix}/blob`, blob, 'application/octet-stream');
});
afterAll(async () => {
  await storage.delete(`${prefix}/blob`);
  storage.client.destroy();
});

test('a plain GET hands over every byte in order through one reused buffer', async () => {
  expect(await canReadInto(storage.client)).toBe(true);
  const hash = createHash('sha256');
  const buffers = new Set<ArrayBufferLike>();
  let chunks = 0;
  const bytes = await storage.readInto(`${prefix}/blob`, (chunk) => {
    hash.update(chunk);
    buffers.add(chunk.buffer);
    chunks += 1;
  });
  expect(bytes).toBe(blob.length);
  expect(hash.digest('hex')).toBe(sha(blob));
  expect(chunks).toBeGreaterThan(20);
  // The response head and the first body bytes arrive in a copy; every later read lands in the one buffer.
  expect(buffers.size).toBeLessThanOrEqual(2);
});

test("a key with characters S3 escapes in its signature (spaces, !'()*) is read as the SDK reads it", async () => {
  const key = `${prefix}/odd name (1)!'*.bin`;
  const small = randomBytes(70_000);
  await storage.putBytes(key, small, 'application/octet-stream');
  try {
    const parts: Buffer[] = [];
    expect(await storage.readInto(key, (chunk) => parts.push(Buffer.from(chunk)))).toBe(small.length);
    expect(Buffer.concat(parts).equals(small)).toBe(true);
  } finally {
    await storage.delete(key);
  }
});

test('through the SDK stream (plain: false) the same bytes arrive', async () => {
  const parts: Buffer[] = [];
  const bytes = await storage.readInto(`${prefix}/blob`, (chunk) => parts.push(Buffer.from(chunk)), { plain: false });
  expect(bytes).toBe(blob.length);
  expect(sha(Buffer.concat(parts))).toBe(sha(blob));
});

test("the store's error is an ObjectReadError with its status and code", async () => {
  const read = storage.readInto(`${prefix}/missing`, () => {
    throw new Error('no bytes expected');
  });
  await expect(read).rejects.toBeInstanceOf(ObjectReadError);
  await expect(read).rejects.toMatchObject({ status: 404, message: expect.stringContaining('NoSuchKey') });
});

test('an endpoint over TLS or with virtual-hosted buckets is read through the SDK', async () => {
  const tls = new S3Client({
    endpoint: 'https://127.0.0.1:9',
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
  });
  const hosted = new S3Client({
    endpoint: 'http://127.0.0.1:9',
    region: 'us-east-1',
    forcePathStyle: false,
    credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
  });
  expect(await canReadInto(tls)).toBe(false);
  expect(await canReadInto(hosted)).toBe(false);
  tls.destroy();
  hosted.destroy();
});

describe('through a proxy the test cuts', () => {
  let proxy: TcpProxy;
  let viaProxy: Storage;
  beforeAll(async () => {
    const c = config();
    const target = new URL(c.S3_ENDPOINT);
    proxy = await startTcpProxy(target.host);
    viaProxy = Storage.fromConfig({ ...c, S3_ENDPOINT: `http://${proxy.address}` });
  });
  afterAll(async () => {
    viaProxy.client.destroy();
    await proxy.close();
  });

  test('a connection cut mid-body fails with how far it got, not a short success', async () => {
    let got = 0;
    const read = viaProxy.readInto(`${prefix}/blob`, (chunk) => {
      got += chunk.length;
      if (got >= MiB && got - chunk.length < MiB) void proxy.cut();
    });
    await expect(read).rejects.toThrow(/connection closed after \d+ of \d+ bytes|ECONNRESET/);
    expect(got).toBeLessThan(blob.length);
    await proxy.restore();
  });

  test('an abort ends the read at once', async () => {
    const abort = new AbortController();
    let got = 0;
    const read = viaProxy.readInto(
      `${prefix}/blob`,
      (chunk) => {
        got += chunk.length;
        if (got >= MiB) abort.abort();
      },
      { signal: abort.signal },
    );
    await expect(read).rejects.toThrow(/aborted/);
    expect(got).toBeLessThan(blob.length);
  });
});
