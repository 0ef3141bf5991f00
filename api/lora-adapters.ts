/**
 * LoRA adapters in the API: pushing one as a version of its own that names its base version
 * (`lora_for`), and choosing one for a prediction of its base (the `lora` input, or an OpenAI
 * `model` of `owner/base:adapter`). Either way the prediction runs the adapter's version, so its
 * queue, placement, prediction JSON and usage record all name the adapter (lib/lora.ts).
 */
import type { Account } from '../db/accounts';
import type { Db } from '../db/client';
import type { ResolvedVersion } from '../db/models';
import { estimateLlamaMemoryBytes, llamaShapeOf } from '../domain/llama-memory';
import type { VersionFile } from '../domain/statuses';
import { engineFileIndex } from '../lib/engine-file';
import { loraBaseOf } from '../lib/lora';
import type { Storage } from '../lib/storage';
import { ValidationError } from './errors';
import { resolveVersionRef } from './resolve-version';
import { ggufMetadata, type ResourceLimits, type VersionSettings } from './version-resources';

const invalid = (field: string, description: string) => new ValidationError([{ field, description }]);

/**
 * The settings and memory of an adapter version for `lora_for`: the base must be a llama.cpp
 * model of the same task that the account may use, and the file a GGUF LoRA adapter of the base's
 * architecture. Its memory is its own context (KV cache) and weights: the base's are counted once, by the base.
 */
export async function adapterVersion(
  deps: { db: Db; storage: Storage; limits: ResourceLimits },
  account: Account,
  adapter: { task: string; engine: string; files: VersionFile[]; settings: VersionSettings; declared?: number; loraFor: string },
): Promise<{ settings: Record<string, unknown>; memoryBytes: number }> {
  const base = await resolveVersionRef(deps.db, account.id, adapter.loraFor, 'lora_for');
  if (base.version.engine !== 'llama.cpp' || adapter.engine !== 'llama.cpp')
    throw invalid('lora_for', 'LoRA adapters run on llama.cpp models only');
  if (loraBaseOf(base.version.settings)) throw invalid('lora_for', `${adapter.loraFor} is a LoRA adapter itself; name its base`);
  if (base.version.task !== adapter.task)
    throw invalid('lora_for', `the base is a ${base.version.task} model and this one ${adapter.task}`);
  const i = engineFileIndex(adapter.files, '.gguf');
  const field = `files.${i}.sha256`;
  const meta = await ggufMetadata(deps.storage, adapter.files[i], field);
  if (meta.get('general.type') !== 'adapter' || meta.get('adapter.type') !== 'lora') {
    throw invalid(field, 'not a LoRA adapter GGUF (general.type must be adapter and adapter.type lora)');
  }
  const baseFile = base.version.files[engineFileIndex(base.version.files, '.gguf')];
  const baseMeta = await ggufMetadata(deps.storage, baseFile, 'lora_for');
  if (meta.get('general.architecture') !== baseMeta.get('general.architecture')) {
    throw invalid(
      field,
      `the adapter is for ${String(meta.get('general.architecture'))} and the base is ${String(baseMeta.get('general.architecture'))}`,
    );
  }
  const shape = llamaShapeOf(baseMeta);
  if (!shape) throw invalid('lora_for', "the base's GGUF metadata lacks its shape");
  const baseSettings = base.version.settings as VersionSettings;
  const contextSize = Math.min(
    adapter.settings.contextSize ?? baseSettings.contextSize ?? deps.limits.defaultContextSize,
    shape.trainContextSize ?? Infinity,
  );
  const sequences = adapter.settings.sequences ?? baseSettings.sequences ?? deps.limits.defaultSequences;
  const memoryBytes = Math.max(adapter.declared ?? 0, estimateLlamaMemoryBytes(adapter.files[i].size, shape.shape, contextSize, sequences));
  // The base's context and sequences carry over unless the adapter sets its own: the engine and the
  // node read them from the adapter's settings alone.
  const inherited = {
    ...(baseSettings.contextSize !== undefined ? { contextSize: baseSettings.contextSize } : {}),
    ...(baseSettings.sequences !== undefined ? { sequences: baseSettings.sequences } : {}),
  };
  return { settings: { ...inherited, ...adapter.settings, loraBase: base.version.id }, memoryBytes };
}

const VERSION_ID = /^[a-f0-9]{64}$/;

/**
 * The version a prediction runs: the resolved one, or the adapter of it that `lora` names (a 422
 * naming `field` when it names none the account may use, or an adapter of another base).
 */
export async function withLora(
  db: Db,
  account: Account,
  resolved: ResolvedVersion,
  lora: unknown,
  field = 'input.lora',
): Promise<ResolvedVersion> {
  if (lora === undefined) return resolved;
  if (typeof lora !== 'string' || lora === '') throw invalid(field, 'expected an adapter: owner/name, name or a version id');
  if (loraBaseOf(resolved.version.settings))
    throw invalid(field, `${resolved.model.owner}/${resolved.model.name} is a LoRA adapter already`);
  // A bare name is one of the caller's own models.
  const ref = lora.includes('/') || VERSION_ID.test(lora) ? lora : `${account.username}/${lora}`;
  const adapter = await resolveVersionRef(db, account.id, ref, field);
  const base = loraBaseOf(adapter.version.settings);
  if (base !== resolved.version.id) {
    throw invalid(
      field,
      base ? `${lora} is an adapter of version ${base}, not of ${resolved.version.id}` : `${lora} is not a LoRA adapter`,
    );
  }
  return adapter;
}

/** `owner/base:adapter` (OpenAI's `model`): the base and the adapter; a 64-hex suffix is a version, not an adapter. */
export function splitAdapterSuffix(model: string): { model: string; adapter?: string } {
  const colon = model.indexOf(':');
  if (colon < 0 || VERSION_ID.test(model.slice(colon + 1))) return { model };
  return { model: model.slice(0, colon), adapter: model.slice(colon + 1) };
}
