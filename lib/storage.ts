/**
 * Object storage on the plain S3 API, so MinIO, AWS S3, R2 or any S3-compatible store will do.
 * Weights are content addressed: `blobs/sha256/<digest>`.
 */
import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetBucketLifecycleConfigurationCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutBucketLifecycleConfigurationCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { Config } from './config';
import { canReadInto, type ReadIntoOptions, readObjectInto } from './object-read-into';

export const blobKey = (sha256: string): string => `blobs/sha256/${sha256}`;

/**
 * Where one upload of a blob lands until its bytes are verified: unique per upload, so
 * concurrent uploads of one digest never share (or delete) each other's object, and outside
 * `blobs/`, so nothing that reads weights ever sees unverified bytes.
 */
export const blobUploadKey = (sha256: string): string => `uploads/sha256/${sha256}/${randomUUID()}`;

/** S3 copies up to 5 GiB in one request; bigger objects are copied in parts. */
const MAX_SINGLE_COPY_BYTES = 5 * 2 ** 30;

export class Storage {
  /** Whether readInto() may GET on a plain socket (./object-read-into.ts): known after its first call. */
  private plainGets: Promise<boolean> | undefined;

  constructor(
    readonly client: S3Client,
    readonly bucket: string,
  ) {}

  static fromConfig(
    c: Pick<
      Config,
      'S3_ENDPOINT' | 'S3_REGION' | 'S3_FORCE_PATH_STYLE' | 'S3_ACCESS_KEY_ID' | 'S3_SECRET_ACCESS_KEY' | 'S3_SESSION_TOKEN' | 'S3_BUCKET'
    >,
  ): Storage {
    const client = new S3Client({
      endpoint: c.S3_ENDPOINT,
      region: c.S3_REGION,
      forcePathStyle: c.S3_FORCE_PATH_STYLE,
      credentials: { accessKeyId: c.S3_ACCESS_KEY_ID, secretAccessKey: c.S3_SECRET_ACCESS_KEY, sessionToken: c.S3_SESSION_TOKEN },
    });
    return new Storage(client, c.S3_BUCKET);
  }

  async ensureBucket(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch {
      await this.client.send(new CreateBucketCommand({ Bucket: this.bucket })).catch((err: { name?: string }) => {
        if (err.name !== 'BucketAlreadyOwnedByYou' && err.name !== 'BucketAlreadyExists') throw err;
      });
    }
  }

  /** Deletes every object in the bucket, a thousand (one request) at a time; returns how many. */
  async emptyBucket(): Promise<number> {
    let deleted = 0;
    for (;;) {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, MaxKeys: 1000 }));
      const keys = (page.Contents ?? []).flatMap((o) => (o.Key ? [{ Key: o.Key }] : []));
      if (keys.length === 0) return deleted;
      await this.client.send(new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: keys, Quiet: true } }));
      deleted += keys.length;
    }
  }

  /**
   * Uploads cut off before their bytes were verified (a process killed mid-PUT) leave objects and
   * parts under `uploads/`: the store itself expires them after a day. Other rules are kept.
   */
  async expireUnverifiedUploads(): Promise<void> {
    const id = 'kiln-expire-unverified-uploads';
    const current = await this.client
      .send(new GetBucketLifecycleConfigurationCommand({ Bucket: this.bucket }))
      .then((r) => r.Rules ?? [])
      .catch((err: { name?: string }) => {
        if (err.name === 'NoSuchLifecycleConfiguration') return [];
        throw err;
      });
    if (current.some((r) => r.ID === id)) return;
    const rule = {
      ID: id,
      Status: 'Enabled' as const,
      Filter: { Prefix: 'uploads/' },
      Expiration: { Days: 1 },
      AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
    };
    await this.client.send(
      new PutBucketLifecycleConfigurationCommand({ Bucket: this.bucket, LifecycleConfiguration: { Rules: [...current, rule] } }),
    );
  }

  /** Size of the object, or undefined when it is not there. */
  async size(key: string): Promise<number | undefined> {
    try {
      const head = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return head.ContentLength;
    } catch (err) {
      if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return undefined;
      throw err;
    }
  }

  /** Streams a local file up in parts: memory stays flat whatever the file's size. */
  async putFile(key: string, path: string, onProgress?: (loaded: number) => void): Promise<void> {
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: key, Body: createReadStream(path) },
      queueSize: 4,
      partSize: 16 * 2 ** 20,
    });
    if (onProgress) upload.on('httpUploadProgress', (p) => onProgress(p.loaded ?? 0));
    await upload.done();
  }

  /** Streams any readable into an object in parts, without knowing its length up front. */
  async putStream(key: string, body: Readable, onProgress?: (loaded: number) => void): Promise<void> {
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: key, Body: body },
      queueSize: 4,
      partSize: 16 * 2 ** 20,
    });
    if (onProgress) upload.on('httpUploadProgress', (p) => onProgress(p.loaded ?? 0));
    await upload.done();
  }

  /**
   * Copies an object within the bucket on the server side: nothing passes through this process.
   * Objects over `singleCopyBytes` go as a multipart copy of `partBytes` parts.
   */
  async copy(from: string, to: string, opts: { size?: number; singleCopyBytes?: number; partBytes?: number } = {}): Promise<void> {
    const size = opts.size ?? (await this.size(from));
    if (size === undefined) throw new Error(`no object ${from} to copy`);
    const source = `${this.bucket}/${from.split('/').map(encodeURIComponent).join('/')}`;
    if (size <= (opts.singleCopyBytes ?? MAX_SINGLE_COPY_BYTES)) {
      await this.client.send(new CopyObjectCommand({ Bucket: this.bucket, Key: to, CopySource: source }));
      return;
    }
    const partBytes = opts.partBytes ?? 512 * 2 ** 20;
    const { UploadId } = await this.client.send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: to }));
    try {
      const parts = [];
      for (let start = 0, n = 1; start < size; start += partBytes, n++) {
        const end = Math.min(start + partBytes, size) - 1;
        const part = await this.client.send(
          new UploadPartCopyCommand({
            Bucket: this.bucket,
            Key: to,
            UploadId,
            PartNumber: n,
            CopySource: source,
            CopySourceRange: `bytes=${start}-${end}`,
          }),
        );
        parts.push({ PartNumber: n, ETag: part.CopyPartResult?.ETag });
      }
      await this.client.send(
        new CompleteMultipartUploadCommand({ Bucket: this.bucket, Key: to, UploadId, MultipartUpload: { Parts: parts } }),
      );
    } catch (err) {
      await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: to, UploadId })).catch(() => undefined);
      throw err;
    }
  }

  /** A small object in one PUT (a JSON document, a marker). */
  async putBytes(key: string, body: Buffer | string, contentType = 'application/json'): Promise<void> {
    await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType }));
  }

  /** Every key under the prefix, a listing page (up to 1000) at a time. */
  async *list(prefix: string): AsyncGenerator<string[]> {
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }));
      yield (page.Contents ?? []).flatMap((o) => (o.Key ? [o.Key] : []));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  /**
   * The object's bytes from `start` on (up to `end`, exclusive); a ranged GET is what lets a
   * download resume, and a batch read just its chunk of a large input.
   */
  async read(key: string, opts: { start?: number; end?: number; signal?: AbortSignal } = {}): Promise<Readable> {
    const range =
      opts.start || opts.end !== undefined ? `bytes=${opts.start ?? 0}-${opts.end !== undefined ? opts.end - 1 : ''}` : undefined;
    const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: range }), { abortSignal: opts.signal });
    return res.Body as Readable;
  }

  /**
   * The whole object's bytes, in order, to `sink`, and their count. Through one reused buffer
   * where the endpoint allows (./object-read-into.ts: no garbage for V8 to collect), else through
   * the SDK's stream; `plain: false` takes the stream anyway. A chunk is valid only during its call.
   */
  async readInto(key: string, sink: (chunk: Buffer) => void, opts: ReadIntoOptions & { plain?: boolean } = {}): Promise<number> {
    this.plainGets ??= canReadInto(this.client).catch(() => false);
    if (opts.plain !== false && (await this.plainGets)) return readObjectInto(this.client, this.bucket, key, sink, opts);
    const body = await this.read(key, { signal: opts.signal });
    let bytes = 0;
    try {
      for await (const chunk of body) {
        sink(chunk as Buffer);
        bytes += (chunk as Buffer).length;
      }
    } finally {
      // A body not read to its end (the sink threw) holds its connection.
      if (!body.readableEnded) body.destroy();
    }
    return bytes;
  }
}
