/**
 * Server-side copies, the step that puts a verified upload in place: one request up to S3's
 * 5 GiB limit, a multipart copy past it (tried here with small parts). And the lifecycle rule
 * that clears uploads abandoned before they were verified.
 */
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { GetBucketLifecycleConfigurationCommand } from '@aws-sdk/client-s3';
import { config } from '../../lib/config';
import { Storage } from '../../lib/storage';

jest.setTimeout(60_000);

const MiB = 2 ** 20;
const storage = Storage.fromConfig(config());
const prefix = `test/copy-${Date.now()}`;
let blob: Buffer;

const readAll = async (key: string) => Buffer.concat((await (await storage.read(key)).toArray()) as Buffer[]);

beforeAll(async () => {
  await storage.ensureBucket();
  // Not a whole number of parts, so the last one is short.
  blob = randomBytes(11 * MiB + 777);
  await storage.putStream(`${prefix}/source`, Readable.from([blob]));
});
afterAll(async () => {
  for (const key of ['source', 'single', 'parts']) await storage.delete(`${prefix}/${key}`);
  storage.client.destroy();
});

test('a copy in one request, and one in parts, are the same bytes', async () => {
  await storage.copy(`${prefix}/source`, `${prefix}/single`);
  expect((await readAll(`${prefix}/single`)).equals(blob)).toBe(true);
  await storage.copy(`${prefix}/source`, `${prefix}/parts`, { singleCopyBytes: 5 * MiB, partBytes: 5 * MiB });
  expect(await storage.size(`${prefix}/parts`)).toBe(blob.length);
  expect((await readAll(`${prefix}/parts`)).equals(blob)).toBe(true);
});

test('unverified uploads expire, beside any rule the bucket had', async () => {
  await storage.expireUnverifiedUploads();
  await storage.expireUnverifiedUploads();
  const { Rules } = await storage.client.send(new GetBucketLifecycleConfigurationCommand({ Bucket: storage.bucket }));
  expect(Rules?.filter((r) => r.ID === 'kiln-expire-unverified-uploads')).toEqual([
    expect.objectContaining({ Status: 'Enabled', Filter: { Prefix: 'uploads/' }, Expiration: { Days: 1 } }),
  ]);
});
