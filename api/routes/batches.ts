/**
 * Batches: many inputs for one model, run as one durable workflow (`batch-<id>`) in chunks at
 * batch priority, with results as a JSONL file (one line per input, in input order).
 */
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { type Request, Router } from 'express';
import { z } from 'zod';
import { type BatchRow, getBatch, listBatches, writeBatchSnapshot } from '../../db/batches';
import type { Db } from '../../db/client';
import { getFile } from '../../db/files';
import { decodeCursor, encodeCursor } from '../../db/paging';
import { batchWorkflowId } from '../../domain/batch-contracts';
import { taskInputSchema } from '../../domain/tasks';
import type { FetchInputDeps } from '../../lib/fetch-input';
import { newId } from '../../lib/ids';
import type { Storage } from '../../lib/storage';
import { currentAccount } from '../auth';
import { type BatchSource, loadBatchInputs, MAX_BATCH_INPUTS, storeBatchInputs } from '../batch-inputs';
import { batchJson } from '../batch-json';
import { NotFoundError, ValidationError } from '../errors';
import type { UrlContext } from '../prediction-json';
import { resolveVersionRef } from '../resolve-version';
import { batchBody, errorBody } from '../response-schemas';
import { retryBatch } from '../retry-batch';
import { errorResponses, jsonContent, jsonResponse, pageOf, pathParams, type RouteContract } from '../route-contract';
import { batchArgsOf, startBatchRun } from '../start-batch';
import { parseOr422 } from '../validation';

export const createBatchBody = z
  .strictObject({
    version: z.string().min(1).describe('A version id, `owner/name` or `owner/name:version`'),
    inputs: z.array(z.unknown()).min(1).max(MAX_BATCH_INPUTS).optional().describe('The inputs, each an object of the model input'),
    input_file: z
      .string()
      .regex(/^[a-z2-7]{26}$/, 'a file id from POST /v1/files')
      .optional()
      .describe('A JSONL file uploaded with POST /v1/files: one input object per line'),
    input_url: z
      .url({ protocol: /^https?$/ })
      .max(2048)
      .optional()
      .describe('A JSONL file at this URL'),
    // A chunk's checkpoint (its result lines so far) travels in heartbeat details, which Temporal caps in size.
    chunk_size: z.number().int().min(1).max(100).default(10).describe('Inputs per chunk: the unit of progress, retry and parallelism'),
  })
  .refine((b) => [b.inputs, b.input_file, b.input_url].filter((x) => x !== undefined).length === 1, {
    message: 'give exactly one of inputs, input_file or input_url',
    path: ['inputs'],
  });

const listQuery = z.object({
  cursor: z.string().optional(),
  page_size: z.coerce.number().int().min(1).max(100).default(100),
});

const TERMINAL = ['succeeded', 'failed', 'canceled'];

export interface BatchRouteDeps {
  db: Db;
  temporal: Client;
  storage: Storage;
  controlQueue: string;
  fetch: FetchInputDeps;
  maxInputBytes: number;
  parallelism: number;
  chunksPerRun: number;
  urls: (req: Request) => UrlContext;
}

export function batchRoutes(deps: BatchRouteDeps): Router {
  const router = Router();
  const { db } = deps;

  const render = async (row: BatchRow, req: Request) => {
    const file = row.outputFileId ? await getFile(db, row.outputFileId) : undefined;
    return batchJson(row, deps.urls(req), file?.size);
  };

  router.post('/batches', async (req, res) => {
    const account = currentAccount(res);
    const body = parseOr422(createBatchBody, req.body ?? {});
    const resolved = await resolveVersionRef(db, account.id, body.version);
    const source: BatchSource =
      body.inputs !== undefined
        ? { inputs: body.inputs }
        : body.input_file !== undefined
          ? { input_file: body.input_file }
          : { input_url: body.input_url! };
    const loaded = await loadBatchInputs(source, taskInputSchema(resolved.version.task), account.id, deps);
    // Every item runs the batch's version: an adapter per item would be ignored, not run.
    const withLora = loaded.inputs.findIndex((input) => input.lora !== undefined);
    if (withLora >= 0) {
      throw new ValidationError([
        { field: `inputs[${withLora}].lora`, description: "a batch runs one version: give the LoRA adapter as the batch's version" },
      ]);
    }
    const id = newId();
    await storeBatchInputs(deps.storage, id, loaded.inputs, body.chunk_size);
    const args = batchArgsOf(deps, account, resolved, {
      id,
      total: loaded.inputs.length,
      chunkSize: body.chunk_size,
      source: loaded.source,
      createdAt: new Date().toISOString(),
    });
    await startBatchRun(deps, account, args);
    // Revision 0: any write from the workflow itself takes precedence.
    await writeBatchSnapshot(db, {
      id,
      accountId: account.id,
      model: args.model,
      versionId: args.versionId,
      status: 'starting',
      total: args.total,
      completed: 0,
      failed: 0,
      chunkSize: args.chunkSize,
      source: args.source,
      error: null,
      logs: '',
      outputFileId: null,
      createdAt: args.createdAt,
      startedAt: null,
      completedAt: null,
      revision: 0,
    });
    const row = (await getBatch(db, account.id, id))!;
    res
      .status(201)
      .location(`/v1/batches/${id}`)
      .json(await render(row, req));
  });

  router.get('/batches', async (req, res) => {
    const account = currentAccount(res);
    const query = parseOr422(listQuery, req.query);
    const cursor = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
    if (query.cursor !== undefined && !cursor)
      throw new ValidationError([{ field: 'cursor', description: 'is not a cursor this API returned' }]);
    const page = await listBatches(db, account.id, { limit: query.page_size, cursor });
    const base = deps.urls(req).baseUrl;
    const next = page.next
      ? `${base}/v1/batches?${new URLSearchParams({ cursor: encodeCursor(page.next), ...(req.query.page_size ? { page_size: String(query.page_size) } : {}) })}`
      : null;
    res.json({ previous: null, next, results: await Promise.all(page.rows.map((r) => render(r, req))) });
  });

  router.get('/batches/:id', async (req, res) => {
    const row = await getBatch(db, currentAccount(res).id, req.params.id);
    if (!row) throw new NotFoundError(`Batch ${req.params.id} not found`);
    res.json(await render(row, req));
  });

  router.post('/batches/:id/cancel', async (req, res) => {
    const account = currentAccount(res);
    const row = await getBatch(db, account.id, req.params.id);
    if (!row) throw new NotFoundError(`Batch ${req.params.id} not found`);
    if (!TERMINAL.includes(row.status)) {
      try {
        await deps.temporal.workflow.getHandle(batchWorkflowId(row.id)).cancel();
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
    }
    res.json(await render((await getBatch(db, account.id, row.id)) ?? row, req));
  });

  router.post('/batches/:id/retry', async (req, res) => {
    const account = currentAccount(res);
    const row = await getBatch(db, account.id, req.params.id);
    if (!row) throw new NotFoundError(`Batch ${req.params.id} not found`);
    res.status(201).json(await render(await retryBatch(deps, account, row), req));
  });

  return router;
}

const oneBatch = { '200': jsonResponse('The batch', batchBody), ...errorResponses };

export const batchContracts: RouteContract[] = [
  {
    method: 'post',
    path: '/v1/batches',
    summary: 'Run many inputs on one model (inline, an uploaded JSONL file, or a JSONL URL)',
    request: { body: jsonContent(createBatchBody) },
    responses: { '201': jsonResponse('Created', batchBody), ...errorResponses },
  },
  {
    method: 'get',
    path: '/v1/batches',
    summary: 'Your batches, newest first',
    request: { query: listQuery },
    responses: { '200': jsonResponse('A page', pageOf(batchBody)), ...errorResponses },
  },
  {
    method: 'get',
    path: '/v1/batches/{id}',
    summary: 'A batch and its progress',
    request: { params: pathParams('id') },
    responses: oneBatch,
  },
  {
    method: 'post',
    path: '/v1/batches/{id}/cancel',
    summary: 'Cancel; the output keeps the inputs finished before',
    request: { params: pathParams('id') },
    responses: oneBatch,
  },
  {
    method: 'post',
    path: '/v1/batches/{id}/retry',
    summary:
      'Run again the items of an ended batch that failed or never ran: a new run of its workflow (same id); succeeded items keep their output',
    request: { params: pathParams('id') },
    responses: {
      '201': jsonResponse('The new run started; attempt and run_id name it', batchBody),
      '409': jsonResponse('Starting or processing, or succeeded with no failed items: nothing to retry', errorBody),
      ...errorResponses,
    },
  },
];
