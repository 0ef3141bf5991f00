/**
 * Engine nodes parse untrusted model files, so what they hold is what a malicious GGUF could take.
 * These tests look at the suite's running engine worker (its environment, read from /proc) and
 * try each of its credentials against the real Postgres, MinIO and API.
 */
import { createHash, createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import postgres from 'postgres';
import { streamUrl } from '../../api/prediction-json';
import { closeDb, type Db } from '../../db/client';
import { config } from '../../lib/config';
import { newId } from '../../lib/ids';
import { payloadKey, s3PayloadStore } from '../../lib/payload-refs';
import type { UrlSigner } from '../../lib/signing';
import { blobKey, Storage } from '../../lib/storage';
import { API_URL, api, newAccount, testDb } from '../helpers';

jest.setTimeout(60_000);

const runDir = process.env.KILN_RUN_DIR ?? path.resolve('.data/test');

/** The environment the suite's engine worker process runs with. */
function engineProcessEnv(): Record<string, string> {
  const pid = readFileSync(path.join(runDir, 'pids', 'engine-worker.pid'), 'utf8').trim();
  const raw = readFileSync(`/proc/${pid}/environ`, 'utf8');
  return Object.fromEntries(
    raw
      .split('\0')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}

let db: Db;
let engine: Record<string, string>;
let token: string;
const storage = Storage.fromConfig(config());
beforeAll(async () => {
  db = testDb();
  engine = engineProcessEnv();
  token = (await newAccount(db, 'engine-priv')).token;
});
afterAll(() => closeDb(db));

test('the engine process holds none of the root secrets', () => {
  const roots = ['S3_SECRET_ACCESS_KEY', 'KILN_URL_SIGNING_KEY', 'KILN_SECRETS_KEY'];
  for (const name of roots) {
    const value = process.env[name];
    expect(value).toBeTruthy();
    const holders = Object.entries(engine)
      .filter(([, v]) => v.includes(value!))
      .map(([k]) => k);
    expect({ name, holders }).toEqual({ name, holders: [] });
  }
  expect(new URL(engine.DATABASE_URL).username).toBe('kiln_engine');
  expect(engine.S3_ACCESS_KEY_ID).not.toBe(process.env.S3_ACCESS_KEY_ID);
});

describe("the engine's database role", () => {
  let sql: postgres.Sql;
  beforeAll(() => {
    sql = postgres(engine.DATABASE_URL, { max: 1, onnotice: () => {} });
  });
  afterAll(() => sql.end());

  const denied = (query: Promise<unknown>) => expect(query).rejects.toMatchObject({ code: '42501' /* insufficient_privilege */ });

  test('cannot read accounts, API tokens, webhook secrets, predictions or files', async () => {
    await denied(sql`select id, username from accounts limit 1`);
    await denied(sql`select token_hash from api_tokens limit 1`);
    await denied(sql`select key from webhook_secrets limit 1`);
    await denied(sql`select input, output from predictions limit 1`);
    await denied(sql`select input from predictions limit 1`);
    await denied(sql`update predictions set input = '{}' where id = 'none'`);
    await denied(
      sql`insert into predictions (id, account_id, model, version_id, input, status, created_at) values ('x', 'none', 'm', 'v', '{}', 'starting', now())`,
    );
    await denied(sql`select account_id, predict_seconds from usage_records limit 1`);
    await denied(sql`select account_id from admissions limit 1`);
    await denied(sql`select id from files limit 1`);
    await denied(sql`select data from prediction_events limit 1`);
    await denied(sql`update model_versions set memory_bytes = 1`);
    await denied(sql`select name, owner from deployments limit 1`);
    await denied(sql`create table engine_was_here (x int)`);
  });

  test('can do what an engine does: read versions, keep its node row, append stream events, record output files', async () => {
    await sql
      .begin(async (tx) => {
        await tx`select id, files, memory_bytes, settings from model_versions limit 1`;
        await tx`select version_id, min_instances, max_instances, owner_id from deployments limit 1`;
        const node = `priv-${newId().slice(0, 8)}`;
        await tx`insert into nodes (id, memory_bytes) values (${node}, 1)`;
        await tx`update nodes set heartbeat_at = now() where id = ${node}`;
        await tx`delete from nodes where id = ${node}`;
        const [event] =
          await tx`insert into prediction_events (prediction_id, event, data) values ('priv-test', 'output', 'x') returning id`;
        await tx`select id, event, attempt from prediction_events where prediction_id = 'priv-test' and id >= ${event.id}`;
        await tx`insert into files (id, account_id, name, content_type, size, sha256) values (${newId()}, 'none', 'o.png', 'image/png', 1, 'x')`;
        // The hot path: a prediction's transition (not its input or output), its slot, its usage.
        await tx`select id, logs, revision from predictions where id = 'priv-test' for update`;
        await tx`update predictions set status = 'succeeded', output = '"x"', logs = 'x', metrics = '{}', completed_at = now(), revision = 2 where id = 'priv-test'`;
        await tx`delete from admissions where prediction_id = 'priv-test'`;
        await tx`insert into usage_records (prediction_id, account_id, model, version_id, task, status, hardware) values ('priv-test', 'none', 'm', 'v', 't', 'succeeded', 'cpu') on conflict do nothing`;
        // Nothing of it stays.
        throw Object.assign(new Error('rollback'), { rollback: true });
      })
      .catch((err: { rollback?: boolean }) => {
        if (!err.rollback) throw err;
      });
  });
});

describe("the engine's storage credentials", () => {
  const bucket = config().S3_BUCKET;
  let s3: S3Client;
  beforeAll(() => {
    s3 = new S3Client({
      endpoint: config().S3_ENDPOINT,
      region: config().S3_REGION,
      forcePathStyle: true,
      credentials: {
        accessKeyId: engine.S3_ACCESS_KEY_ID,
        secretAccessKey: engine.S3_SECRET_ACCESS_KEY,
        sessionToken: engine.S3_SESSION_TOKEN,
      },
    });
  });
  afterAll(() => s3.destroy());

  const denied = (send: Promise<unknown>) => expect(send).rejects.toMatchObject({ name: 'AccessDenied' });

  test('read weights and write output files', async () => {
    const [version] = await db.query.modelVersions.findMany({ limit: 1 });
    const weights = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: blobKey(version.files[0].sha256) }));
    expect(weights.ContentLength).toBe(version.files[0].size);
    const output = `files/${newId()}`;
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: output, Body: 'engine output' }));
    const back = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: output }));
    expect(await back.Body!.transformToString()).toBe('engine output');
    await storage.delete(output);
  });

  test('payloads by reference: create-once puts and reads under payloads/sha256/, no rewrite, no delete', async () => {
    const body = Buffer.from(JSON.stringify({ big: newId() }));
    const key = payloadKey(createHash('sha256').update(body).digest('hex'));
    try {
      await s3PayloadStore(new Storage(s3, bucket)).putOnce(key, body);
      // Written once: a second put of the key is refused by the store (If-None-Match), and the store answers it as done.
      await expect(
        s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'other bytes', IfNoneMatch: '*' })),
      ).rejects.toMatchObject({ $metadata: { httpStatusCode: 412 } });
      await s3PayloadStore(new Storage(s3, bucket)).putOnce(key, body);
      expect(Buffer.from(await s3PayloadStore(new Storage(s3, bucket)).get(key)).equals(body)).toBe(true);
      await denied(s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: key })));
      await denied(s3.send(new PutObjectCommand({ Bucket: bucket, Key: `payloads/other/${newId()}`, Body: 'x' })));
    } finally {
      await storage.delete(key);
    }
  });

  test('KV snapshots: reads, writes, lists and deletes under kv/, and nowhere else', async () => {
    const key = `kv/${newId()}/owner/anchor/snapshot.kvstate`;
    try {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'kv state' }));
      const back = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      expect(await back.Body!.transformToString()).toBe('kv state');
      const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: key.slice(0, key.lastIndexOf('/') + 1) }));
      expect(listed.Contents?.map((o) => o.Key)).toEqual([key]);
      await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
      expect(await storage.size(key)).toBeUndefined();
      // The listing right is kv/'s alone: not the bucket, not another prefix, not one that merely starts alike.
      await denied(s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'blobs/' })));
      await denied(s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'kv' })));
      await denied(s3.send(new PutObjectCommand({ Bucket: bucket, Key: `kvx/${newId()}`, Body: 'x' })));
    } finally {
      await storage.delete(key);
    }
  });

  test('cannot write weights, delete anything, list the bucket, or write outside outputs', async () => {
    const scratch = blobKey(`scratch-${newId()}`);
    await storage.putStream(scratch, (await import('node:stream')).Readable.from([Buffer.from('weights')]));
    try {
      await denied(s3.send(new PutObjectCommand({ Bucket: bucket, Key: blobKey(`forged-${newId()}`), Body: 'not weights' })));
      await denied(s3.send(new PutObjectCommand({ Bucket: bucket, Key: scratch, Body: 'overwritten' })));
      await denied(s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: scratch })));
      await denied(s3.send(new ListObjectsV2Command({ Bucket: bucket })));
      await denied(s3.send(new PutObjectCommand({ Bucket: bucket, Key: `batches/${newId()}/input.jsonl`, Body: '{}' })));
      await denied(s3.send(new PutObjectCommand({ Bucket: bucket, Key: `elsewhere/${newId()}`, Body: 'x' })));
      expect(await storage.size(scratch)).toBe('weights'.length);
    } finally {
      await storage.delete(scratch);
    }
  });
});

test('no key the engine holds signs a stream URL the API accepts', async () => {
  const created = await api('/v1/models/kiln/echo-fixture/predictions', {
    token,
    body: { input: { text: 'x' } },
    headers: { prefer: 'wait' },
  });
  expect(created.status).toBe(201);
  const id: string = created.body.id;
  const status = async (url: string) => {
    const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    await res.body?.cancel();
    return res.status;
  };
  expect(await status(created.body.urls.stream)).toBe(200);
  // Every value in the engine's environment, used as an HMAC key as it is or hex-decoded.
  const keys = Object.values(engine)
    .filter((v) => v.length >= 16)
    .flatMap((v) => (/^[0-9a-f]+$/i.test(v) ? [v, Buffer.from(v, 'hex')] : [v]));
  for (const key of keys) {
    const signer = { sign: (subject: string) => createHmac('sha256', key).update(subject).digest('base64url').slice(0, 32) } as UrlSigner;
    expect(await status(streamUrl({ baseUrl: API_URL, signer }, id))).toBe(401);
  }
});
