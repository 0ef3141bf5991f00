/**
 * A batch's inputs, from wherever they come (inline, an uploaded JSONL file, a JSONL URL):
 * each is validated against the task's schema before anything starts (422 naming
 * `inputs[3].prompt`), then all are stored as one JSONL object with an index of where each
 * chunk starts, which is what the chunk activities read.
 */
import { Readable } from 'node:stream';
import type { z } from 'zod';
import { batchIndexKey, batchInputKey } from '../db/batches';
import type { Db } from '../db/client';
import { getFile } from '../db/files';
import { type FetchInputDeps, fetchInput, InputFetchError, InputTooLargeError } from '../lib/fetch-input';
import { fileKey } from '../lib/file-keys';
import type { Storage } from '../lib/storage';
import { ApiError, type InvalidField, ValidationError } from './errors';

export const MAX_BATCH_INPUTS = 100_000;
/** A 422 names at most this many wrong fields: enough to fix a file, not a wall of text. */
const MAX_REPORTED = 20;

export type BatchSource = { inputs: unknown[] } | { input_file: string } | { input_url: string };

export interface BatchInputDeps {
  db: Db;
  storage: Storage;
  fetch: FetchInputDeps;
  /** The most bytes a batch's input file (uploaded or at a URL) may have: it is read into memory whole. */
  maxInputBytes: number;
}

/** 413 naming the field and the limit. */
function tooLarge(field: 'input_file' | 'input_url', limit: number, size?: number): ApiError {
  const description = `${size === undefined ? 'is larger than' : `has ${size} bytes, over`} the limit of ${limit} bytes for a batch's inputs`;
  return new ApiError(413, 'Payload too large', `${field}: ${description}`, { invalid_fields: [{ type: 'invalid', field, description }] });
}

export interface LoadedInputs {
  inputs: Record<string, unknown>[];
  /** `inline`, `file:<id>` or the URL. */
  source: string;
}

/** The lines of a JSONL text as values; a line that is not JSON is reported against its item. */
function parseJsonl(text: string, field: string): unknown[] {
  const items: unknown[] = [];
  const invalid: InvalidField[] = [];
  let line = 0;
  for (const raw of text.split('\n')) {
    line += 1;
    if (raw.trim() === '') continue;
    try {
      items.push(JSON.parse(raw));
    } catch {
      if (invalid.length < MAX_REPORTED)
        invalid.push({ field: `inputs[${items.length}]`, description: `line ${line} of ${field} is not valid JSON` });
      items.push(undefined);
    }
    if (items.length > MAX_BATCH_INPUTS) throw new ValidationError([{ field, description: `holds more than ${MAX_BATCH_INPUTS} inputs` }]);
  }
  if (invalid.length > 0) throw new ValidationError(invalid);
  if (items.length === 0) throw new ValidationError([{ field, description: 'holds no inputs (one JSON object per line)' }]);
  return items;
}

async function loadRaw(source: BatchSource, accountId: string, deps: BatchInputDeps): Promise<{ items: unknown[]; source: string }> {
  if ('inputs' in source) return { items: source.inputs, source: 'inline' };
  if ('input_file' in source) {
    const file = await getFile(deps.db, source.input_file);
    if (!file || file.accountId !== accountId) {
      throw new ValidationError([
        { field: 'input_file', description: `no file ${source.input_file} of yours: upload one with POST /v1/files` },
      ]);
    }
    if (file.size > deps.maxInputBytes) throw tooLarge('input_file', deps.maxInputBytes, file.size);
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of await deps.storage.read(fileKey(file.id))) {
      size += (c as Buffer).length;
      if (size > deps.maxInputBytes) throw tooLarge('input_file', deps.maxInputBytes);
      chunks.push(c as Buffer);
    }
    return { items: parseJsonl(Buffer.concat(chunks).toString('utf8'), 'input_file'), source: `file:${file.id}` };
  }
  try {
    const { bytes } = await fetchInput(source.input_url, { ...deps.fetch, maxBytes: deps.maxInputBytes });
    return { items: parseJsonl(bytes.toString('utf8'), 'input_url'), source: source.input_url };
  } catch (err) {
    if (err instanceof InputTooLargeError) throw tooLarge('input_url', err.limit);
    if (err instanceof InputFetchError) throw new ValidationError([{ field: 'input_url', description: err.message }]);
    throw err;
  }
}

/** Every input checked against the task's schema; a 422 names each wrong field as `inputs[i].field`. */
export async function loadBatchInputs(
  source: BatchSource,
  schema: z.ZodType,
  accountId: string,
  deps: BatchInputDeps,
): Promise<LoadedInputs> {
  const { items, source: from } = await loadRaw(source, accountId, deps);
  const invalid: InvalidField[] = [];
  for (const [i, item] of items.entries()) {
    if (invalid.length >= MAX_REPORTED) break;
    if (!item || typeof item !== 'object' || Array.isArray(item)) {
      invalid.push({ field: `inputs[${i}]`, description: 'must be an object of the model input' });
      continue;
    }
    const parsed = schema.safeParse(item);
    if (!parsed.success) invalid.push(...ValidationError.fromZod(parsed.error, `inputs[${i}]`).fields);
  }
  if (invalid.length > 0) throw new ValidationError(invalid.slice(0, MAX_REPORTED));
  return { inputs: items as Record<string, unknown>[], source: from };
}

/** Writes the inputs as JSONL and the byte offset where each chunk starts (then the total length). */
export async function storeBatchInputs(
  storage: Storage,
  batchId: string,
  inputs: Record<string, unknown>[],
  chunkSize: number,
): Promise<void> {
  const lines = inputs.map((input) => Buffer.from(`${JSON.stringify(input)}\n`));
  const chunks = Math.ceil(inputs.length / chunkSize);
  const index = Buffer.alloc((chunks + 1) * 8);
  let offset = 0;
  for (const [i, line] of lines.entries()) {
    if (i % chunkSize === 0) index.writeBigUInt64LE(BigInt(offset), (i / chunkSize) * 8);
    offset += line.length;
  }
  index.writeBigUInt64LE(BigInt(offset), chunks * 8);
  await storage.putStream(batchInputKey(batchId), Readable.from(lines));
  await storage.putStream(batchIndexKey(batchId), Readable.from([index]));
}
