/**
 * A version's speculative decoding setting, checked and resolved when the version is pushed: a
 * draft model named `owner/name` becomes the version of it that is latest now (so the pair never
 * changes under a running version), and must be a llama.cpp model with the target's vocabulary,
 * since the target checks the draft's tokens id for id.
 */
import { z } from 'zod';
import type { Db } from '../db/client';
import type { SpeculativeSettings } from '../domain/speculative-settings';
import type { VersionFile } from '../domain/statuses';
import { engineFileIndex } from '../lib/engine-file';
import type { Storage } from '../lib/storage';
import { ValidationError } from './errors';
import { resolveVersionRef } from './resolve-version';
import { ggufMetadata, type ResourceLimits, type VersionSettings, versionMemoryBytes } from './version-resources';

const maxDraftTokens = z
  .number()
  .int()
  .min(1)
  .max(64)
  .optional()
  .describe('Most tokens predicted ahead at a time (default 16 for a draft model, 3 for input lookup)');

export const speculativeSetting = z
  .discriminatedUnion('type', [
    z.strictObject({
      type: z.literal('draft'),
      model: z
        .string()
        .regex(/^[^/\s]+\/[^/\s]+$/, 'owner/name')
        .describe('The draft model, owner/name: a smaller llama.cpp model with the same tokenizer (its latest version is used)'),
      maxDraftTokens,
      minDraftTokens: z
        .number()
        .int()
        .min(0)
        .max(64)
        .optional()
        .describe('Tokens the target waits for before it checks a draft (default: maxDraftTokens; 0: whatever is drafted by then)'),
      minConfidence: z
        .number()
        .min(0)
        .max(1)
        .optional()
        .describe('The draft stops at a token it gives less probability than this (default 0.6; 0: never)'),
    }),
    z.strictObject({ type: z.literal('input_lookup'), maxDraftTokens }),
  ])
  .describe(
    "Speculative decoding: a draft model's tokens, or the prompt's own, checked by the model in batches; the output is the same, only faster",
  );

export type SpeculativeSetting = z.infer<typeof speculativeSetting>;

const FIELD = 'settings.speculative.model';
const invalid = (description: string) => new ValidationError([{ field: FIELD, description }]);
const gguf = (files: VersionFile[]) => files[engineFileIndex(files, '.gguf')];
const TOKENIZER_KEYS = [
  'tokenizer.ggml.model',
  'tokenizer.ggml.tokens.sha256',
  'tokenizer.ggml.merges.sha256',
  'tokenizer.ggml.bos_token_id',
  'tokenizer.ggml.eos_token_id',
];

/** What the version stores, and the memory the draft adds to the version's. */
export async function resolveSpeculative(
  deps: { db: Db; storage: Storage; resources: ResourceLimits },
  accountId: string,
  setting: SpeculativeSetting,
  target: { files: VersionFile[]; settings: VersionSettings },
): Promise<{ stored: SpeculativeSettings; memoryBytes: number }> {
  if (setting.type === 'input_lookup') return { stored: setting, memoryBytes: 0 };
  const { version } = await resolveVersionRef(deps.db, accountId, setting.model, FIELD);
  if (version.engine !== 'llama.cpp') throw invalid(`${setting.model} runs on ${version.engine}; a draft must be a llama.cpp (GGUF) model`);
  const [mine, theirs] = await Promise.all([
    ggufMetadata(deps.storage, gguf(target.files), 'files'),
    ggufMetadata(deps.storage, gguf(version.files), FIELD),
  ]);
  const differs = TOKENIZER_KEYS.find((key) => mine.get(key) !== theirs.get(key));
  if (differs) throw invalid(`${setting.model} does not share this model's tokenizer (${differs.replace(/\.sha256$/, '')} differs)`);
  const memoryBytes = await versionMemoryBytes(
    deps.storage,
    { engine: 'llama.cpp', files: version.files, settings: target.settings },
    deps.resources,
  );
  return { stored: { ...setting, version: version.id }, memoryBytes };
}
