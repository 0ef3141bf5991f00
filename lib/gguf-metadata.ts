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

export function parseGgufMetadata(buf: Buffer): GgufMetadataResult {
  let at = 0;
  const need = (n: number) => {
    if (at + n > buf.length) throw new Short('the file ends inside its metadata');
  };
  const u32 = () => {
    need(4);
    at += 4;
    return buf.readUInt32LE(at - 4);
  };
  const count = (what: string) => {
    need(8);
    const n = buf.readBigUInt64LE(at);
    at += 8;
    if (n > MAX_COUNT) throw new Invalid(`${what} ${n} is not plausible`);
    return Number(n);
  };
  const string = () => {
    const n = count('a string length');
    need(n);
    at += n;
    return buf.toString('utf8', at - n, at);
  };
  const scalar = (type: number): GgufScalar => {
    if (type === STRING) return string();
    const size = FIXED_SIZE[type];
    if (size === undefined) throw new Invalid(`unknown value type ${type}`);
    need(size);
    at += size;
    const p = at - size;
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
  };
  /**
   * Arrays (vocabularies, merges) are walked past, not kept: only scalars size a model. The
   * tokenizer's are kept as a digest (`<key>.sha256`), so two models' vocabularies can be compared.
   */
  const skipArray = (key: string) => {
    const start = at;
    skipArrayBody();
    if (key.startsWith('tokenizer.ggml.'))
      metadata.set(`${key}.sha256`, createHash('sha256').update(buf.subarray(start, at)).digest('hex'));
  };
  const metadata = new Map<string, GgufScalar>();
  const skipArrayBody = () => {
    const type = u32();
    const n = count('an array length');
    if (type === STRING) {
      for (let i = 0; i < n; i++) string();
      return;
    }
    const size = FIXED_SIZE[type];
    if (size === undefined) throw new Invalid(`arrays of value type ${type} are not supported`);
    need(n * size);
    at += n * size;
  };
  try {
    if (u32() !== MAGIC) return { kind: 'invalid', reason: 'not a GGUF file (no GGUF magic)' };
    const version = u32();
    if (version !== 2 && version !== 3) return { kind: 'invalid', reason: `GGUF version ${version} is not supported` };
    count('a tensor count');
    const kvs = count('a metadata count');
    for (let i = 0; i < kvs; i++) {
      const key = string();
      const type = u32();
      if (type === ARRAY) skipArray(key);
      else metadata.set(key, scalar(type));
    }
    return { kind: 'metadata', metadata };
  } catch (err) {
    if (err instanceof Short) return { kind: 'short' };
    if (err instanceof Invalid) return { kind: 'invalid', reason: err.message };
    throw err;
  }
}
