/**
 * Payloads by reference (a claim check), as a Temporal PayloadCodec: every Client and Worker Kiln
 * makes encodes with it, so any payload bigger than the inline limit (a 3 MB data-URI image in a
 * prediction's input, a long generation in its output) is stored once in object storage and the
 * history carries a small reference instead. Temporal refuses payloads over 2 MB, and each copy of
 * the input (workflow arguments, local activities, the predict activity, webhook children) would
 * otherwise sit in the history again.
 *
 * The stored object is the payload's own bytes (JSON text for Kiln's payloads) under
 * `payloads/sha256/<hex of those bytes>`: content addressed, so it never changes once written, and
 * the same bytes are stored once. The reference left in history is itself a `json/plain` payload,
 * so the Temporal UI and `temporal workflow show` show what it is (size, sha256, encoding and the
 * first characters) without any codec; the metadata key `kiln-payload-ref` is what the decoder
 * recognises. The codec server (api/codec-server.ts) resolves references for the UI.
 */
import { createHash } from 'node:crypto';
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import type { DataConverter, Payload, PayloadCodec } from '@temporalio/common';
import { LRUCache } from 'lru-cache';
import type { Config } from './config';
import type { Storage } from './storage';

export const PAYLOAD_REF_METADATA_KEY = 'kiln-payload-ref';
const REF_FORMAT = 'v1';
const PREVIEW_CHARS = 120;

export const payloadKey = (sha256: string): string => `payloads/sha256/${sha256}`;

/** What the history holds in place of a large payload (the JSON of the reference payload). */
export interface PayloadRef {
  kiln_payload_ref: {
    sha256: string;
    size: number;
    /** The stored payload's own `encoding` metadata, in clear: what kind of payload it is. */
    encoding?: string;
    /** Where it is stored in Kiln's bucket. */
    key: string;
    /** The first characters of the payload, for people reading the history. */
    preview?: string;
    /** The stored payload's metadata, every value base64 as in Temporal's JSON. */
    metadata: Record<string, string>;
  };
}

/** Where referenced payloads are kept: any store with create-once puts and reads by key. */
export interface PayloadStore {
  /** Stores `body` under `key` unless the key exists (content addressed: same key, same bytes). */
  putOnce(key: string, body: Uint8Array): Promise<void>;
  get(key: string): Promise<Uint8Array>;
}

/** The bucket Kiln already has. Puts are conditional (If-None-Match: *), so an object is never rewritten. */
export function s3PayloadStore(storage: Storage): PayloadStore {
  return {
    async putOnce(key, body) {
      try {
        await storage.client.send(
          new PutObjectCommand({ Bucket: storage.bucket, Key: key, Body: body, IfNoneMatch: '*', ContentType: 'application/octet-stream' }),
        );
      } catch (err) {
        const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
        // 412: already there. 409: a concurrent put of the same key (same bytes) won the race.
        if (status !== 412 && status !== 409) throw err;
      }
    },
    async get(key) {
      const res = await storage.client.send(new GetObjectCommand({ Bucket: storage.bucket, Key: key }));
      return res.Body!.transformToByteArray();
    },
  };
}

export interface PayloadRefOptions {
  /** Payloads whose data is larger than this many bytes are stored and referenced. */
  inlineMaxBytes: number;
  /** Decoded payloads kept in memory, in bytes: a workflow replayed on a worker reads its input once. */
  cacheBytes?: number;
}

const sha256Hex = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const utf8 = (bytes: Uint8Array | null | undefined) => (bytes ? Buffer.from(bytes).toString('utf8') : undefined);

export function isPayloadRef(payload: Payload): boolean {
  return utf8(payload.metadata?.[PAYLOAD_REF_METADATA_KEY]) === REF_FORMAT;
}

/** The reference a payload stands for, read from the reference payload itself. */
export function readPayloadRef(payload: Payload): PayloadRef['kiln_payload_ref'] {
  const ref = (JSON.parse(utf8(payload.data) ?? 'null') as PayloadRef | null)?.kiln_payload_ref;
  if (!ref || !/^[0-9a-f]{64}$/.test(ref.sha256) || typeof ref.size !== 'number' || typeof ref.metadata !== 'object') {
    throw new Error('malformed kiln payload reference');
  }
  return ref;
}

export class PayloadRefCodec implements PayloadCodec {
  /** Keys this process wrote or saw: their put is skipped. */
  private known = new LRUCache<string, true>({ max: 10_000 });
  private writing = new Map<string, Promise<void>>();
  private cache: LRUCache<string, Uint8Array>;

  constructor(
    private store: PayloadStore,
    private opts: PayloadRefOptions,
  ) {
    this.cache = new LRUCache<string, Uint8Array>({
      maxSize: opts.cacheBytes ?? 64 * 2 ** 20,
      sizeCalculation: (v) => Math.max(1, v.length),
    });
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.all(payloads.map((p) => this.encodeOne(p)));
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.all(payloads.map((p) => this.decodeOne(p)));
  }

  private async encodeOne(payload: Payload): Promise<Payload> {
    const data = payload.data ?? new Uint8Array();
    if (data.length <= this.opts.inlineMaxBytes || isPayloadRef(payload)) return payload;
    const sha256 = sha256Hex(data);
    const key = payloadKey(sha256);
    await this.putOnce(key, data);
    this.cache.set(sha256, data);
    const metadata = Object.fromEntries(Object.entries(payload.metadata ?? {}).map(([k, v]) => [k, b64(v)]));
    const text = Buffer.from(data.subarray(0, PREVIEW_CHARS * 4)).toString('utf8');
    const ref: PayloadRef = {
      kiln_payload_ref: {
        sha256,
        size: data.length,
        encoding: utf8(payload.metadata?.encoding),
        key,
        // Whole characters only: a cut through a UTF-8 sequence would show as U+FFFD.
        preview: [...text]
          .slice(0, PREVIEW_CHARS)
          .join('')
          .replace(/\uFFFD+$/, ''),
        metadata,
      },
    };
    return {
      metadata: { encoding: Buffer.from('json/plain'), [PAYLOAD_REF_METADATA_KEY]: Buffer.from(REF_FORMAT) },
      data: Buffer.from(JSON.stringify(ref)),
    };
  }

  private async putOnce(key: string, data: Uint8Array): Promise<void> {
    if (this.known.has(key)) return;
    let pending = this.writing.get(key);
    if (!pending) {
      pending = this.store.putOnce(key, data).finally(() => this.writing.delete(key));
      this.writing.set(key, pending);
    }
    await pending;
    this.known.set(key, true);
  }

  private async decodeOne(payload: Payload): Promise<Payload> {
    if (!isPayloadRef(payload)) return payload;
    const ref = readPayloadRef(payload);
    let data = this.cache.get(ref.sha256);
    if (!data) {
      data = await this.store.get(payloadKey(ref.sha256));
      // The store is shared with engine nodes: bytes that are not what the history names are refused.
      if (data.length !== ref.size || sha256Hex(data) !== ref.sha256) {
        throw new Error(`stored payload ${payloadKey(ref.sha256)} does not match its reference (sha256 or size differs)`);
      }
      this.cache.set(ref.sha256, data);
      this.known.set(payloadKey(ref.sha256), true);
    }
    return { metadata: Object.fromEntries(Object.entries(ref.metadata).map(([k, v]) => [k, Buffer.from(v, 'base64')])), data };
  }
}

type PayloadRefConfig = Pick<Config, 'KILN_PAYLOAD_INLINE_MAX_BYTES' | 'KILN_PAYLOAD_CACHE_MB'>;

/** The codec every Temporal Client and Worker of Kiln encodes with (see the top of this file). */
export function payloadRefCodec(storage: Storage, c: PayloadRefConfig): PayloadRefCodec {
  return new PayloadRefCodec(s3PayloadStore(storage), {
    inlineMaxBytes: c.KILN_PAYLOAD_INLINE_MAX_BYTES,
    cacheBytes: c.KILN_PAYLOAD_CACHE_MB * 2 ** 20,
  });
}

/** `dataConverter` for `new Client(...)` and `Worker.create(...)`. */
export function kilnDataConverter(storage: Storage, c: PayloadRefConfig): DataConverter {
  return { payloadCodecs: [payloadRefCodec(storage, c)] };
}
