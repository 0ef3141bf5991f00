/**
 * `kiln models pull hf://OWNER/REPO[@REVISION]/FILE.gguf`: a GGUF from a Hugging Face-style hub
 * made a version of a Kiln model. The file comes into the download cache (resumed, checked against
 * the hub's sha256, refused over the size limit before a byte comes), its metadata says the task,
 * context and chat template, and `kiln push`'s upload makes the version.
 */
import path from 'node:path';
import { z } from 'zod';
import { ggufFileMetadata } from '../lib/gguf-file-metadata';
import { kilnCache } from '../lib/llama-cpu-build';
import { type ApiContext, CliError, request } from './client';
import { type GgufVersionPlan, ggufVersionPlan } from './gguf-version-plan';
import { downloadHubFile, HubError, headHubFile } from './hub-download';
import { defaultModelName, formatHubRef, hubResolveUrl, parseHubRef } from './hub-ref';
import { push } from './push';

/** The pull's variables (docs/configuration.md, "Variables the scripts read"); flags override them. */
export const hubEnvironment = z.object({
  KILN_HUB_URL: z.url().default('https://huggingface.co'),
  HF_TOKEN: z.string().min(1).optional(),
  KILN_HUB_MAX_MB: z.coerce
    .number()
    .int()
    .positive()
    .default(64 * 1024),
  KILN_HUB_MAX_CONTEXT_SIZE: z.coerce.number().int().min(256).default(8192),
});

export interface PullOptions {
  /** `owner/name`; the account's name and the repository's by default. */
  name?: string;
  hub?: string;
  maxMb?: number;
  maxContext?: number;
  visibility: 'public' | 'private';
  quiet: boolean;
}

export interface Pulled {
  model: string;
  version: string;
  source: string;
  sha256: string;
  size: number;
  plan: GgufVersionPlan;
}

function settingsFrom(env: NodeJS.ProcessEnv) {
  const parsed = hubEnvironment.safeParse(env);
  if (!parsed.success) throw new CliError(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  return parsed.data;
}

async function modelName(ctx: ApiContext, wanted: string | undefined, fallback: string): Promise<string> {
  if (wanted !== undefined) {
    if (!/^[^/]+\/[^/]+$/.test(wanted)) throw new CliError(`--name must be owner/name, not ${wanted}`);
    return wanted;
  }
  const account = await request<{ username: string }>(ctx, '/v1/account');
  return `${account.username}/${fallback}`;
}

/** Creates the model with the task the GGUF calls for; an existing one must already have that task. */
async function ensureModel(ctx: ApiContext, model: string, task: string, visibility: string, description: string): Promise<void> {
  const [owner, name] = model.split('/');
  try {
    await request(ctx, '/v1/models', { method: 'POST', json: { owner, name, task, visibility, description } });
  } catch (err) {
    if (!(err instanceof CliError) || err.status !== 409) throw err;
    const existing = await request<{ task: string }>(ctx, `/v1/models/${model}`);
    if (existing.task !== task)
      throw new CliError(`${model} is a ${existing.task} model, and this GGUF is for ${task}: pull it with another --name`);
  }
}

export async function pull(ctx: ApiContext, source: string, opts: PullOptions, env: NodeJS.ProcessEnv = process.env): Promise<Pulled> {
  const settings = settingsFrom(env);
  const ref = parseHubRef(source);
  const model = await modelName(ctx, opts.name, defaultModelName(ref));
  const log = (line: string) => !opts.quiet && console.error(line);
  const file = await headHubFile(hubResolveUrl(opts.hub ?? settings.KILN_HUB_URL, ref), settings.HF_TOKEN);
  if (opts.maxMb !== undefined && !(opts.maxMb >= 0)) throw new CliError('--max-size is a number of MB');
  const maxBytes = (opts.maxMb ?? settings.KILN_HUB_MAX_MB) * 2 ** 20;
  if (file.size > maxBytes) {
    throw new HubError(
      `${ref.file} is ${(file.size / 2 ** 20).toFixed(1)} MiB, over the pull limit of ${(maxBytes / 2 ** 20).toFixed(0)} MiB (--max-size or KILN_HUB_MAX_MB): nothing was downloaded`,
    );
  }
  const pinned = formatHubRef(ref, file.commit ?? ref.revision);
  log(`${pinned}: ${(file.size / 2 ** 20).toFixed(1)} MiB, sha256 ${file.sha256}`);
  const local = await downloadHubFile(file, {
    cacheDir: path.join(kilnCache(env), 'hub'),
    token: settings.HF_TOKEN,
    quiet: opts.quiet,
    log,
  });
  const plan = ggufVersionPlan(await ggufFileMetadata(local), opts.maxContext ?? settings.KILN_HUB_MAX_CONTEXT_SIZE);
  await ensureModel(ctx, model, plan.task, opts.visibility, `Pulled from ${pinned}`.slice(0, 2000));
  const version = await push(ctx, model, [{ file: local, name: path.basename(ref.file), sha256: file.sha256 }], {
    quiet: opts.quiet,
    settings: plan.contextSize !== undefined ? { contextSize: plan.contextSize } : undefined,
  });
  return { model, version: version.id, source: pinned, sha256: file.sha256, size: file.size, plan };
}
