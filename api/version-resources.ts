/**
 * What a version needs on a node, worked out by the server from its weights: placement packs
 * nodes by this figure, so a pusher's own `memory_bytes` may raise it but never lower it, and
 * settings that multiply it (context size, sequences) are capped.
 */
import { estimateLlamaMemoryBytes, llamaShapeOf } from '../domain/llama-memory';
import type { EngineName, VersionFile } from '../domain/statuses';
import { engineFileIndex } from '../lib/engine-file';
import { parseGgufMetadata } from '../lib/gguf-metadata';
import { blobKey, type Storage } from '../lib/storage';
import { ValidationError } from './errors';

export interface ResourceLimits {
  /** Context an engine gives a version whose settings name none (KILN_ENGINE_CONTEXT_SIZE). */
  defaultContextSize: number;
  /** Sequences an engine gives a version whose settings name none (KILN_ENGINE_SEQUENCES). */
  defaultSequences: number;
  maxContextSize: number;
  maxSequences: number;
}

export interface VersionSettings {
  sequences?: number;
  contextSize?: number;
}

/** An ONNX session holds its weights, a working copy and activations: loosely three times the file. */
export const ONNX_MEMORY_FACTOR = 3;
/** The first read of a GGUF header; vocabularies push some past it, so reads grow up to the cap. */
const FIRST_HEADER_READ = 1 * 2 ** 20;
const MAX_HEADER_BYTES = 64 * 2 ** 20;

const invalid = (field: string, description: string) => new ValidationError([{ field, description }]);

async function readPrefix(storage: Storage, key: string, end: number): Promise<Buffer> {
  const body = await storage.read(key, { end });
  return Buffer.concat((await body.toArray()) as Buffer[]);
}

/** The GGUF header's scalars, read from the stored blob with ranged reads that grow until the header fits. */
export async function ggufMetadata(storage: Storage, file: VersionFile, field: string) {
  if (file.size === 0) throw invalid(field, 'not a readable GGUF file: it is empty');
  for (let bytes = Math.min(FIRST_HEADER_READ, file.size); ; bytes = Math.min(bytes * 8, MAX_HEADER_BYTES, file.size)) {
    const parsed = parseGgufMetadata(await readPrefix(storage, blobKey(file.sha256), bytes));
    if (parsed.kind === 'metadata') return parsed.metadata;
    if (parsed.kind === 'invalid') throw invalid(field, `not a readable GGUF file: ${parsed.reason}`);
    if (bytes >= file.size) throw invalid(field, 'not a readable GGUF file: it ends inside its header');
    if (bytes >= MAX_HEADER_BYTES) throw invalid(field, `the GGUF header is over ${MAX_HEADER_BYTES} bytes`);
  }
}

/**
 * The memory a version needs, at least what it declared; refuses (422, naming the field)
 * settings over the limits, a context past the model's trained one, and weights that are not
 * what the engine reads.
 */
export async function versionMemoryBytes(
  storage: Storage,
  version: { engine: EngineName; files: VersionFile[]; declared?: number; settings: VersionSettings },
  limits: ResourceLimits,
): Promise<number> {
  const { engine, files, declared, settings } = version;
  if (settings.sequences !== undefined && settings.sequences > limits.maxSequences) {
    throw invalid('settings.sequences', `at most ${limits.maxSequences} on this server`);
  }
  if (settings.contextSize !== undefined && settings.contextSize > limits.maxContextSize) {
    throw invalid('settings.contextSize', `at most ${limits.maxContextSize} on this server`);
  }
  if (engine === 'llama.cpp') {
    const i = engineFileIndex(files, '.gguf');
    const field = `files.${i}.sha256`;
    const model = llamaShapeOf(await ggufMetadata(storage, files[i], field));
    if (!model) throw invalid(field, 'the GGUF metadata lacks the block count, embedding length or head count');
    if (settings.contextSize !== undefined && model.trainContextSize !== undefined && settings.contextSize > model.trainContextSize) {
      throw invalid('settings.contextSize', `the model was trained on a context of ${model.trainContextSize}`);
    }
    const contextSize = Math.min(settings.contextSize ?? limits.defaultContextSize, model.trainContextSize ?? Infinity);
    const computed = estimateLlamaMemoryBytes(files[i].size, model.shape, contextSize, settings.sequences ?? limits.defaultSequences);
    return Math.max(declared ?? 0, computed);
  }
  if (engine === 'onnxruntime') {
    return Math.max(declared ?? 0, Math.ceil(files[engineFileIndex(files, '.onnx')].size * ONNX_MEMORY_FACTOR));
  }
  // The echo fixture loads nothing: what it declares, or its files plus a fifth.
  return declared ?? Math.ceil(files.reduce((n, f) => n + f.size, 0) * 1.2) + 64 * 2 ** 20;
}
