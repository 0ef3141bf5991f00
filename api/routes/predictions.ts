import { WorkflowNotFoundError } from '@temporalio/client';
import { Router, type Request } from 'express';
import { z } from 'zod';
import { resolveModelVersion, resolveVersionId, type ResolvedVersion } from '../../db/models';
import { decodeCursor, encodeCursor, getPrediction, listPredictions, type PredictionRow } from '../../db/predictions';
import type { Account } from '../../db/accounts';
import { predictionWorkflowId } from '../../workflows/types';
import { currentAccount } from '../auth';
import { createPrediction, type CreateDeps } from '../create-prediction';
import { BadRequestError, NotFoundError, ValidationError } from '../errors';
import { predictionJson, TERMINAL_STATUSES } from '../prediction-json';
import { parseOr422 } from '../validation';

const inputSchema = z.record(z.string(), z.unknown());

const createBody = z.strictObject({
  version: z.string().min(1).describe('A version id, `owner/name` or `owner/name:version`'),
  input: inputSchema,
  /** Accepted for compatibility with Replicate's clients; every prediction can be streamed. */
  stream: z.boolean().optional(),
});

const modelCreateBody = z.strictObject({ input: inputSchema, stream: z.boolean().optional() });

const listQuery = z.object({
  cursor: z.string().optional(),
  page_size: z.coerce.number().int().min(1).max(100).default(100),
});

const MODEL_REF = /^([a-zA-Z0-9][\w.-]*)\/([a-zA-Z0-9][\w.-]*)(?::([a-f0-9]{64}))?$/;
const VERSION_ID = /^[a-f0-9]{64}$/;

/** `Prefer: wait` or `wait=N`: how long to hold the response for a result, in seconds (max 60). */
export function preferWaitSeconds(header: string | undefined): number {
  if (!header) return 0;
  const match = /(?:^|[,;\s])wait(?:=(\d+))?(?:$|[,;\s])/.exec(header);
  if (!match) return 0;
  return Math.min(match[1] === undefined ? 60 : Number(match[1]), 60);
}

export interface PredictionRoutesDeps extends CreateDeps {
  baseUrl: (req: Request) => string;
}

export function predictionRoutes(deps: PredictionRoutesDeps): Router {
  const router = Router();
  const { db, temporal } = deps;

  async function resolveVersionField(account: Account, version: string): Promise<ResolvedVersion> {
    let resolved: ResolvedVersion | undefined;
    const ref = MODEL_REF.exec(version);
    if (ref) resolved = await resolveModelVersion(db, account.id, { owner: ref[1], name: ref[2], versionId: ref[3] });
    else if (VERSION_ID.test(version)) resolved = await resolveVersionId(db, account.id, version);
    if (!resolved) {
      throw new ValidationError([{ field: 'version', description: `no model version ${version} that you can use` }]);
    }
    return resolved;
  }

  /** Holds the answer until the prediction finishes or `Prefer: wait` runs out. */
  async function waitFor(row: PredictionRow, req: Request): Promise<PredictionRow> {
    const seconds = preferWaitSeconds(req.get('prefer'));
    if (seconds === 0 || TERMINAL_STATUSES.has(row.status)) return row;
    const handle = temporal.workflow.getHandle(predictionWorkflowId(row.id));
    const timeout = new Promise<void>((resolve) => setTimeout(resolve, seconds * 1000).unref());
    await Promise.race([handle.result().catch(() => undefined), timeout]);
    return (await getPrediction(db, row.accountId, row.id)) ?? row;
  }

  async function respondCreated(req: Request, res: import('express').Response, row: PredictionRow) {
    const final = await waitFor(row, req);
    res.status(201).location(`/v1/predictions/${final.id}`).json(predictionJson(final, deps.baseUrl(req)));
  }

  const idempotencyKey = (req: Request) => {
    const key = req.get('idempotency-key');
    if (key !== undefined && (key.length === 0 || key.length > 255)) {
      throw new BadRequestError('Idempotency-Key must be 1 to 255 characters');
    }
    return key;
  };

  router.post('/predictions', async (req, res) => {
    const account = currentAccount(res);
    const body = parseOr422(createBody, req.body ?? {});
    const resolved = await resolveVersionField(account, body.version);
    const row = await createPrediction(deps, account, resolved, body.input, { idempotencyKey: idempotencyKey(req) });
    await respondCreated(req, res, row);
  });

  router.post('/models/:owner/:name/predictions', async (req, res) => {
    const account = currentAccount(res);
    const body = parseOr422(modelCreateBody, req.body ?? {});
    const resolved = await resolveModelVersion(db, account.id, { owner: req.params.owner, name: req.params.name });
    if (!resolved) throw new NotFoundError(`Model ${req.params.owner}/${req.params.name} not found`);
    const row = await createPrediction(deps, account, resolved, body.input, { idempotencyKey: idempotencyKey(req) });
    await respondCreated(req, res, row);
  });

  router.get('/predictions', async (req, res) => {
    const account = currentAccount(res);
    const query = parseOr422(listQuery, req.query);
    const cursor = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
    if (query.cursor !== undefined && !cursor) {
      throw new ValidationError([{ field: 'cursor', description: 'is not a cursor this API returned' }]);
    }
    const page = await listPredictions(db, account.id, { limit: query.page_size, cursor });
    const base = deps.baseUrl(req);
    const next = page.next
      ? `${base}/v1/predictions?${new URLSearchParams({ cursor: encodeCursor(page.next), ...(req.query.page_size ? { page_size: String(query.page_size) } : {}) })}`
      : null;
    res.json({ previous: null, next, results: page.rows.map((r) => predictionJson(r, base)) });
  });

  router.get('/predictions/:id', async (req, res) => {
    const row = await getPrediction(db, currentAccount(res).id, req.params.id);
    if (!row) throw new NotFoundError(`Prediction ${req.params.id} not found`);
    res.json(predictionJson(row, deps.baseUrl(req)));
  });

  router.post('/predictions/:id/cancel', async (req, res) => {
    const account = currentAccount(res);
    const row = await getPrediction(db, account.id, req.params.id);
    if (!row) throw new NotFoundError(`Prediction ${req.params.id} not found`);
    if (!TERMINAL_STATUSES.has(row.status)) {
      try {
        await temporal.workflow.getHandle(predictionWorkflowId(row.id)).cancel();
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
    }
    const current = (await getPrediction(db, account.id, row.id)) ?? row;
    res.json(predictionJson(current, deps.baseUrl(req)));
  });

  return router;
}
