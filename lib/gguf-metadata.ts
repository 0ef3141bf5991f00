/**
 * The scalar metadata of a GGUF file's header, read from a prefix of its bytes. The API reads
 * untrusted uploads with it, so it never trusts a length: every read is checked against the bytes
 * at hand, and the caller decides how many bytes it will fetch. node-llama-cpp's reader is not
 * used here because it reads zeros past the end of a short file and allocates whatever length a
 * string claims.
 */
import { createHash } from 'node:crypto';
import { KilnError } from './kiln-error';

export type GgufScalar = number | bigint | boolean | string;

export type GgufMetadataResult =
  | { kind: 'metadata'; metadata: Map<string, GgufScalar> }
  /** The header goes on past the bytes given: read a longer prefix. */
  | { kind: 'short' }
  | { kind: 'invalid'; reason: string };

const MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
const FIXED_SIZE: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const STRING = 8;
const ARRAY = 9;
/** Far past any real model (llama.cpp's own limits are lower); a bigger count is a broken file. */
const MAX_COUNT = 2n ** 32n;

class Short extends KilnError {}
class Invalid extends KilnError {}

/** Reads a GGUF header front to back, every read checked against the bytes at hand. */
class HeaderCursor {
  private at = 0;

  constructor(private readonly buf: Buffer) {}

  private need(n: number): void {
    if (this.at + n > this.buf.length) throw new Short('the file ends inside its metadata');
  }

  /** Moves past `n` bytes and gives where they begin. */
  private take(n: number): number {
    this.need(n);
    this.at += n;
    return this.at - n;
  }

  u32(): number {
    return this.buf.readUInt32LE(this.take(4));
  }

  count(what: string): number {
    const n = this.buf.readBigUInt64LE(this.take(8));
    if (n > MAX_COUNT) throw new Invalid(`${what} ${n} is not plausible`);
    return Number(n);
  }

  string(): string {
    const n = this.count('a string length');
    const p = this.take(n);
    return this.buf.toString('utf8', p, p + n);
  }

  scalar(type: number): GgufScalar {
    if (type === STRING) return this.string();
    const size = FIXED_SIZE[type];
    if (size === undefined) throw new Invalid(`unknown value type ${type}`);
    return readFixed(this.buf, type, this.take(size));
  }

  /** Walks past an array and gives its bytes (type, length and items). */
  skipArray(): Buffer {
    const start = this.at;
    const type = this.u32();
    const n = this.count('an array length');
    if (type === STRING) {
      for (let i = 0; i < n; i++) this.string();
    } else {
      const size = FIXED_SIZE[type];
      if (size === undefined) throw new Invalid(`arrays of value type ${type} are not supported`);
      this.take(n * size);
    }
    return this.buf.subarray(start, this.at);
  }
}

/** A fixed-size value of GGUF type `type` at `p`. */
function readFixed(buf: Buffer, type: number, p: number): GgufScalar {
  switch (type) {
    case 0:
      return buf.readUInt8(p);
    case 1:
      return buf.readInt8(p);
    case 2:
      return buf.readUInt16LE(p);
    case 3:
      return buf.readInt16LE(p);
    case 4:
      return buf.readUInt32LE(p);
    case 5:
      return buf.readInt32LE(p);
    case 6:
      return buf.readFloatLE(p);
    case 7:
      return buf.readUInt8(p) !== 0;
    case 10:
      return buf.readBigUInt64LE(p);
    case 11:
      return buf.readBigInt64LE(p);
    default:
      return buf.readDoubleLE(p);
  }
}

export function parseGgufMetadata(buf: Buffer): GgufMetadataResult {
  const header = new HeaderCursor(buf);
  const metadata = new Map<string, GgufScalar>();
  try {
    if (header.u32() !== MAGIC) return { kind: 'invalid', reason: 'not a GGUF file (no GGUF magic)' };
    const version = header.u32();
    if (version !== 2 && version !== 3) return { kind: 'invalid', reason: `GGUF version ${version} is not supported` };
    header.count('a tensor count');
    const kvs = header.count('a metadata count');
    for (let i = 0; i < kvs; i++) {
      const key = header.string();
      const type = header.u32();
      if (type !== ARRAY) {
        metadata.set(key, header.scalar(type));
        continue;
      }
      // Arrays (vocabularies, merges) are walked past, not kept: only scalars size a model. The
      // tokenizer's are kept as a digest (`<key>.sha256`), so two models' vocabularies can be compared.
      const bytes = header.skipArray();
      if (key.startsWith('tokenizer.ggml.')) metadata.set(`${key}.sha256`, createHash('sha256').update(bytes).digest('hex'));
    }
    return { kind: 'metadata', metadata };
  } catch (err) {
    if (err instanceof Short) return { kind: 'short' };
    if (err instanceof Invalid) return { kind: 'invalid', reason: err.message };
    throw err;
  }
}
