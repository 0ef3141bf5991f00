/**
 * Models, versions and weights. Weights go to object storage as content-addressed blobs
 * (`PUT /v1/blobs/sha256/<digest>`, streamed to a key of their own, checked against the digest,
 * then copied into place once); a version is a manifest of blobs plus task, engine and memory
 * needs. Blobs are stored once for everyone, but an account sees and names only the digests it
 * uploaded or that a model it owns, or a public one, already uses (db/blobs.ts).
 */
import { createHash } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { type Request, Router } from 'express';
import { z } from 'zod';
import { mayUseBlob, recordBlobUpload, usableBlobs } from '../../db/blobs';
import type { Db } from '../../db/client';
import { addVersion, findVisibleModel, getVersion, listVersions, listVisibleModels, upsertModel } from '../../db/models';
import { liveNodes } from '../../db/nodes';
import { engines } from '../../domain/statuses';
import { taskNames, taskType } from '../../domain/tasks';
import { byteMeter } from '../../lib/byte-meter';
import { skuOfNode } from '../../lib/hardware';
import { blobKey, blobUploadKey, type Storage } from '../../lib/storage';
import { currentAccount } from '../auth';
import { resolveSpeculative, speculativeSetting } from '../draft-model';
import { ApiError, BadRequestError, NotFoundError, ValidationError } from '../errors';
import { adapterVersion } from '../lora-adapters';
import { modelJson, versionJson } from '../model-json';
import { blobUploadBody, errorBody, hardwareBody, modelBody, versionBody } from '../response-schemas';
import { errorResponses, jsonContent, jsonResponse, pageOf, pathParams, type RouteContract } from '../route-contract';
import { parseOr422 } from '../validation';
import { type ResourceLimits, versionMemoryBytes } from '../version-resources';

const NAME = /^[a-z0-9][a-z0-9._-]{0,99}$/;

export const createModelBody = z.strictObject({
  owner: z.string().min(1),
  name: z.string().regex(NAME, 'lower-case letters, digits, dots, dashes and underscores'),
  visibility: z.enum(['public', 'private']),
  // Checked at each request, not fixed at load: fixtures add their task types at a process's start.
  task: z
    .string()
    .refine((t) => taskType(t) !== undefined, { error: () => `a task type this server serves: ${taskNames().join(', ')}` })
    .describe(`The task type: ${taskNames().join(', ')}`),
  description: z.string().max(2000).optional(),
  hardware: z.string().optional().describe("Accepted for Replicate's clients; placement decides where a model runs"),
});

const sha256 = z.string().regex(/^[a-f0-9]{64}$/, 'a sha256 digest: 64 lower-case hex characters');

export const createVersionBody = z.strictObject({
  files: z
    .array(z.strictObject({ path: z.string().min(1).max(500), sha256, size: z.number().int().min(0) }))
    .min(1)
    .max(100),
  engine: z.enum(engines).optional(),
  memory_bytes: z
    .number()
    .int()
    .positive()
    .optional()
    .describe('Memory the loaded model needs, if more than the server works out from the weights (GGUF metadata × context × sequences)'),
  settings: z
    .strictObject({
      sequences: z
        .number()
        .int()
        .min(1)
        .max(64)
        .optional()
        .describe('Predictions run at once on one loaded copy (the server may allow fewer: KILN_MAX_SEQUENCES)'),
      contextSize: z
        .number()
        .int()
        .min(256)
        .max(2 ** 20)
        .optional()
        .describe("Tokens of context per sequence: at most the model's trained context and the server's KILN_MAX_CONTEXT_SIZE"),
      idleTtlSeconds: z.number().int().min(1).optional().describe('Unloaded after this long without predictions'),
      speculative: speculativeSetting.optional(),
    })
    .optional(),
  retry: z
    .strictObject({
      max_attempts: z.number().int().min(1).max(10).describe('Attempts in all, the first included; 1: never retry'),
      initial_interval_s: z.number().min(0).max(3600).default(1).describe('Wait before the second attempt, in seconds'),
      backoff: z.number().min(1).max(10).default(2).describe('Each later wait is the previous one times this'),
    })
    .optional()
    .describe('How failed attempts of a prediction (or a batch chunk) are retried'),
  lora_for: z
    .string()
    .min(1)
    .max(300)
    .optional()
    .describe(
      'This version is a GGUF LoRA adapter of that base version (`owner/name`, `owner/name:version` or a version id): it runs on the base, loaded once',
    ),
});

export function modelRoutes(deps: {
  db: Db;
  storage: Storage;
  baseUrl: (req: Request) => string;
  maxBlobBytes: number;
  resources: ResourceLimits;
}): Router {
  const router = Router();
  const { db, storage } = deps;

  router.get('/models', async (req, res) => {
    const after = typeof req.query.cursor === 'string' ? Buffer.from(req.query.cursor, 'base64url').toString('utf8') : undefined;
    const rows = await listVisibleModels(db, currentAccount(res).id, { limit: 100, after });
    const page = rows.slice(0, 100);
    const last = page[page.length - 1];
    const base = deps.baseUrl(req);
    res.json({
      previous: null,
      next:
        rows.length > 100 && last ? `${base}/v1/models?cursor=${Buffer.from(`${last.owner}/${last.name}`).toString('base64url')}` : null,
      results: await Promise.all(
        page.map(async (m) => modelJson(m, base, m.latestVersionId ? await getVersion(db, m.latestVersionId) : undefined)),
      ),
    });
  });

  router.post('/models', async (req, res) => {
    const account = currentAccount(res);
    const body = parseOr422(createModelBody, req.body ?? {});
    if (body.owner !== account.username) {
      throw new ValidationError([{ field: 'owner', description: `you can create models as ${account.username} only` }]);
    }
    if (await findVisibleModel(db, account.id, body.owner, body.name)) {
      throw new ApiError(409, 'Conflict', `Model ${body.owner}/${body.name} already exists`);
    }
    const model = await upsertModel(db, {
      ownerId: account.id,
      owner: account.username,
      name: body.name,
      task: body.task,
      visibility: body.visibility,
      description: body.description,
    });
    res.status(201).json(modelJson(model, deps.baseUrl(req)));
  });

  async function visibleModel(req: Request, accountId: string) {
    const model = await findVisibleModel(db, accountId, String(req.params.owner), String(req.params.name));
    if (!model) throw new NotFoundError(`Model ${req.params.owner}/${req.params.name} not found`);
    return model;
  }

  router.get('/models/:owner/:name', async (req, res) => {
    const model = await visibleModel(req, currentAccount(res).id);
    const latest = model.latestVersionId ? await getVersion(db, model.latestVersionId) : undefined;
    res.json(modelJson(model, deps.baseUrl(req), latest));
  });

  router.get('/models/:owner/:name/versions', async (req, res) => {
    const model = await visibleModel(req, currentAccount(res).id);
    res.json({ previous: null, next: null, results: (await listVersions(db, model.id)).map(versionJson) });
  });

  router.get('/models/:owner/:name/versions/:id', async (req, res) => {
    const model = await visibleModel(req, currentAccount(res).id);
    const version = await getVersion(db, req.params.id);
    if (!version || version.modelId !== model.id) throw new NotFoundError(`Version ${req.params.id} not found`);
    res.json(versionJson(version));
  });

  /** A new version from blobs already uploaded. Only the owner may push. */
  router.post('/models/:owner/:name/versions', async (req, res) => {
    const account = currentAccount(res);
    const model = await visibleModel(req, account.id);
    if (model.ownerId !== account.id) throw new NotFoundError(`Model ${model.owner}/${model.name} not found`);
    const body = parseOr422(createVersionBody, req.body ?? {});
    const usable = await usableBlobs(
      db,
      account.id,
      body.files.map((f) => f.sha256),
    );
    for (const [i, f] of body.files.entries()) {
      // A digest the account may not use reads as absent, exactly as HEAD answers it.
      const size = usable.has(f.sha256) ? await storage.size(blobKey(f.sha256)) : undefined;
      if (size === undefined) {
        throw new ValidationError([
          {
            field: `files.${i}.sha256`,
            description: `no blob ${f.sha256} of yours (${f.path}): upload it with PUT /v1/blobs/sha256/<digest>`,
          },
        ]);
      }
      if (size !== f.size) throw new ValidationError([{ field: `files.${i}.size`, description: `the blob has ${size} bytes` }]);
    }
    const engine = body.engine ?? taskType(model.task)?.engines[0];
    if (!engine) throw new BadRequestError(`no engine serves task ${model.task}`);
    const served = taskType(model.task)?.engines ?? [];
    if (!served.includes(engine)) {
      throw new ValidationError([
        { field: 'engine', description: `task ${model.task} is served by ${served.join(', ') || 'no engine here'}` },
      ]);
    }
    const { speculative, ...requested } = body.settings ?? {};
    if (speculative && engine !== 'llama.cpp')
      throw new ValidationError([{ field: 'settings.speculative', description: 'only llama.cpp versions decode speculatively' }]);
    if (speculative && body.lora_for) {
      throw new ValidationError([
        { field: 'settings.speculative', description: 'an adapter decodes on its base: set speculative on the base version' },
      ]);
    }
    const adapter = body.lora_for
      ? await adapterVersion({ db, storage, limits: deps.resources }, account, {
          task: model.task,
          engine,
          files: body.files,
          settings: requested,
          declared: body.memory_bytes,
          loraFor: body.lora_for,
        })
      : undefined;
    const settings: Record<string, unknown> = adapter?.settings ?? requested;
    let memoryBytes =
      adapter?.memoryBytes ??
      (await versionMemoryBytes(storage, { engine, files: body.files, declared: body.memory_bytes, settings }, deps.resources));
    if (speculative) {
      const draft = await resolveSpeculative(deps, account.id, speculative, { files: body.files, settings });
      Object.assign(settings, { speculative: draft.stored });
      memoryBytes += draft.memoryBytes;
    }
    const version = await addVersion(db, model, { task: model.task, engine, files: body.files, memoryBytes, settings, retry: body.retry });
    res.status(201).json(versionJson(version));
  });

  /** 200 only for a blob the caller may use: whether anyone else's weights are stored is not told. */
  router.head('/blobs/sha256/:digest', async (req, res) => {
    const digest = req.params.digest;
    const visible = sha256.safeParse(digest).success && (await mayUseBlob(db, currentAccount(res).id, digest));
    const size = visible ? await storage.size(blobKey(digest)) : undefined;
    if (size === undefined) return void res.status(404).end();
    res.set('Content-Length', String(size)).status(200).end();
  });

  /**
   * Streams the body to a key of this upload's own while hashing it (memory stays flat for any
   * size); only bytes that match the digest are copied into place, so a wrong body never
   * touches the blob others read. Whoever sends the right bytes is recorded as an uploader,
   * which is what lets them see the blob and name it in versions, even when it was stored
   * before. A blob the caller may use already is not sent again.
   */
  router.put('/blobs/sha256/:digest', async (req, res) => {
    const account = currentAccount(res);
    const digest = parseOr422(sha256, req.params.digest, 'digest');
    const key = blobKey(digest);
    if (await mayUseBlob(db, account.id, digest)) {
      const existing = await storage.size(key);
      if (existing !== undefined) {
        req.resume();
        return void res.status(200).json({ sha256: digest, size: existing, created: false });
      }
    }
    const hash = createHash('sha256');
    let size = 0;
    const meter = byteMeter((chunk) => {
      size += chunk.length;
      if (size > deps.maxBlobBytes) return new ApiError(413, 'Payload too large', `blobs are limited to ${deps.maxBlobBytes} bytes`);
      hash.update(chunk);
    });
    const staging = blobUploadKey(digest);
    try {
      await Promise.all([pipeline(req, meter), storage.putStream(staging, meter)]);
      const actual = hash.digest('hex');
      if (actual !== digest) throw new ValidationError([{ field: 'digest', description: `the body's sha256 is ${actual}` }]);
      const stored = await storage.size(key);
      if (stored === undefined) await storage.copy(staging, key, { size });
      await recordBlobUpload(db, account.id, digest, size);
      res.status(stored === undefined ? 201 : 200).json({ sha256: digest, size, created: stored === undefined });
    } finally {
      await storage.delete(staging).catch(() => undefined);
    }
  });

  /** What the engine nodes that are up offer, and each one's role. */
  router.get('/hardware', async (_req, res) => {
    const nodes = await liveNodes(db);
    const kinds = new Map(nodes.map((n) => [skuOfNode(n), n.gpu ?? 'CPU']));
    res.json(
      [...kinds]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([sku, name]) => ({
          name,
          sku,
          nodes: nodes.filter((n) => skuOfNode(n) === sku).length,
          // KILN_ENGINE_ROLE per node: long prompts are split between `prefill` and `decode` nodes.
          roles: nodes
            .filter((n) => skuOfNode(n) === sku)
            .sort((a, b) => a.id.localeCompare(b.id))
            .map((n) => ({ node: n.id, role: n.role })),
        })),
    );
  });

  return router;
}

const modelParams = pathParams('owner', 'name');

export const modelContracts: RouteContract[] = [
  {
    method: 'get',
    path: '/v1/models',
    summary: 'Models you can use',
    request: { query: z.object({ cursor: z.string().optional() }) },
    responses: { '200': jsonResponse('A page', pageOf(modelBody)), ...errorResponses },
  },
  {
    method: 'post',
    path: '/v1/models',
    summary: 'Create a model',
    request: { body: jsonContent(createModelBody) },
    responses: { '201': jsonResponse('Created', modelBody), '409': jsonResponse('It exists', errorBody), ...errorResponses },
  },
  {
    method: 'get',
    path: '/v1/models/{owner}/{name}',
    summary: 'A model',
    request: { params: modelParams },
    responses: { '200': jsonResponse('The model', modelBody), ...errorResponses },
  },
  {
    method: 'get',
    path: '/v1/models/{owner}/{name}/versions',
    summary: 'Versions',
    request: { params: modelParams },
    responses: { '200': jsonResponse('A page', pageOf(versionBody)), ...errorResponses },
  },
  {
    method: 'post',
    path: '/v1/models/{owner}/{name}/versions',
    summary:
      "Create a version from blobs you uploaded (or that a model you own, or a public one, uses). memory_bytes is the server's figure from the weights (GGUF metadata × context × sequences; ONNX file size × 3), or yours if larger",
    request: { params: modelParams, body: jsonContent(createVersionBody) },
    responses: { '201': jsonResponse('Created', versionBody), ...errorResponses },
  },
  {
    method: 'get',
    path: '/v1/models/{owner}/{name}/versions/{id}',
    summary: 'A version',
    request: { params: pathParams('owner', 'name', 'id') },
    responses: { '200': jsonResponse('The version', versionBody), ...errorResponses },
  },
  {
    method: 'head',
    path: '/v1/blobs/sha256/{digest}',
    summary:
      'Is this blob stored for you? Yes only if you uploaded it or a model you own, or a public one, uses it; others’ weights read as absent',
    request: { params: pathParams('digest') },
    responses: { '200': { description: 'Yes: Content-Length is its size' }, '404': { description: 'Not stored, or not yours to use' } },
  },
  {
    method: 'put',
    path: '/v1/blobs/sha256/{digest}',
    summary:
      'Upload weights: streamed to a key of this upload, checked against the digest, then copied into place; verified bytes make you one of the blob’s uploaders',
    request: {
      params: pathParams('digest'),
      body: { content: { 'application/octet-stream': { schema: z.string().meta({ format: 'binary' }) } } },
    },
    responses: {
      '201': jsonResponse('Stored', blobUploadBody),
      '200': jsonResponse('Already stored; now yours to use', blobUploadBody),
      '413': jsonResponse('Over the server’s blob size limit', errorBody),
      ...errorResponses,
    },
  },
  {
    method: 'get',
    path: '/v1/hardware',
    summary: 'What the live engine nodes offer',
    responses: { '200': jsonResponse('Hardware', hardwareBody), ...errorResponses },
  },
];
