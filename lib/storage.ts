/**
 * Object storage on the plain S3 API, so MinIO, AWS S3, R2 or any S3-compatible store will do.
 * Weights are content addressed: `blobs/sha256/<digest>`.
 */
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import type { Config } from './config';

export const blobKey = (sha256: string): string => `blobs/sha256/${sha256}`;

export class Storage {
  constructor(
    readonly client: S3Client,
    readonly bucket: string,
  ) {}

  static fromConfig(c: Config): Storage {
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

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  /**
   * The object's bytes from `start` on (up to `end`, exclusive); a ranged GET is what lets a
   * download resume, and a batch read just its chunk of a large input.
   */
  async read(key: string, opts: { start?: number; end?: number; signal?: AbortSignal } = {}): Promise<Readable> {
    const range = opts.start || opts.end !== undefined ? `bytes=${opts.start ?? 0}-${opts.end !== undefined ? opts.end - 1 : ''}` : undefined;
    const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: range }), { abortSignal: opts.signal });
    return res.Body as Readable;
  }
}
