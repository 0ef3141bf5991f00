import { WorkflowNotFoundError } from '@temporalio/client';
import { type Request, type Response, Router } from 'express';
import { z } from 'zod';
import type { Account } from '../../db/accounts';
import { type ResolvedVersion, resolveModelVersion } from '../../db/models';
import { decodeCursor, encodeCursor } from '../../db/paging';
import { getPrediction, listPredictions, type PredictionRow } from '../../db/predictions';
import { predictionWorkflowId } from '../../domain/contracts';
import { isTerminalStatus } from '../../domain/statuses';
import { setRateLimitHeaders } from '../admission-limits';
import { currentAccount } from '../auth';
import { type CreateDeps, createPrediction } from '../create-prediction';
import { NotFoundError, ValidationError } from '../errors';
import type { EventHub } from '../event-hub';
import { throwIfInputFailed } from '../input-failure';
import type { OpenConnection, OpenConnections } from '../open-connections';
import { withOutputSoFar } from '../output-so-far';
import { predictionJson, type UrlContext } from '../prediction-json';
import { createBody, modelCreateBody, parseCancelAfter, parsePriority, predictionCreateOptions } from '../prediction-request';
import { holdPreferWait, waitAsAsked } from '../prefer-wait';
import { queuePosition } from '../queue-position';
import { notePrediction } from '../request-log';
import { resolveVersionRef } from '../resolve-version';
import { errorBody, predictionBody, setupProgressBody } from '../response-schemas';
import { retryPrediction } from '../retry-prediction';
import {
  errorResponses,
  jsonContent,
  jsonResponse,
  pageOf,
  pathParams,
  predictionCreateHeaders,
  type RouteContract,
} from '../route-contract';
import { setupProgress } from '../setup-progress';
import { parseOr422 } from '../validation';

const retryHeaders = predictionCreateHeaders.pick({ prefer: true, 'cancel-after': true, 'kiln-priority': true });

export const retryBody = z.strictObject({
  version: z
    .string()
    .min(1)
    .optional()
    .describe("Run this version instead (an id, `owner/name` or `owner/name:version`); the prediction's own when left out"),
});

const listQuery = z.object({
  cursor: z.string().optional(),
  page_size: z.coerce.number().int().min(1).max(100).default(100),
});

export interface PredictionRoutesDeps extends CreateDeps {
  urls: (req: Request) => UrlContext;
  /** `Prefer: wait` hears of the final projection through it (see awaitPrediction). */
  hub: EventHub;
  /** Bounds the requests an account holds waiting, and ends them when their token or account is withdrawn. */
  connections: OpenConnections;
}

export function predictionRoutes(deps: PredictionRoutesDeps): Router {
  const router = Router();
  const { db, temporal } = deps;

  const resolveVersionField = (account: Account, version: string) => resolveVersionRef(db, account.id, version);

  /** `readAt`: when the create began (performance.now()); the row it gave is no older. */
  async function respondCreated(req: Request, res: Response, row: PredictionRow, wait: OpenConnection | undefined, readAt?: number) {
    const final = await withOutputSoFar(db, await waitAsAsked(deps, req, row, wait, readAt));
    notePrediction(res, final.id);
    throwIfInputFailed(final);
    res
      .status(201)
      .location(`/v1/predictions/${final.id}`)
      .json(predictionJson(final, deps.urls(req)));
  }

  /** Creates the prediction, then answers as `Prefer: wait` asks: at once, or when it finished. */
  async function createAndRespond(
    req: Request,
    res: Response,
    account: Account,
    resolved: ResolvedVersion,
    body: z.infer<typeof modelCreateBody>,
  ): Promise<void> {
    const wait = holdPreferWait(deps.connections, req, res);
    const readAt = performance.now();
    const options = predictionCreateOptions(body, (name) => req.get(name));
    const { row, rateLimit } = await createPrediction(deps, account, resolved, body.input, options);
    setRateLimitHeaders(res, rateLimit);
    await respondCreated(req, res, row, wait, readAt);
  }

  router.post('/predictions', async (req, res) => {
    const account = currentAccount(res);
    const body = parseOr422(createBody, req.body ?? {});
    await createAndRespond(req, res, account, await resolveVersionField(account, body.version), body);
  });

  router.post('/models/:owner/:name/predictions', async (req, res) => {
    const account = currentAccount(res);
    const body = parseOr422(modelCreateBody, req.body ?? {});
    const resolved = await resolveModelVersion(db, account.id, { owner: req.params.owner, name: req.params.name });
    if (!resolved) throw new NotFoundError(`Model ${req.params.owner}/${req.params.name} not found`);
    await createAndRespond(req, res, account, resolved, body);
  });

  router.get('/predictions', async (req, res) => {
    const account = currentAccount(res);
    const query = parseOr422(listQuery, req.query);
    const cursor = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
    if (query.cursor !== undefined && !cursor) {
      throw new ValidationError([{ field: 'cursor', description: 'is not a cursor this API returned' }]);
    }
    const page = await listPredictions(db, account.id, { limit: query.page_size, cursor });
    const urls = deps.urls(req);
    const next = page.next
      ? `${urls.baseUrl}/v1/predictions?${new URLSearchParams({ cursor: encodeCursor(page.next), ...(req.query.page_size ? { page_size: String(query.page_size) } : {}) })}`
      : null;
    res.json({ previous: null, next, results: page.rows.map((r) => predictionJson(r, urls)) });
  });

  router.get('/predictions/:id', async (req, res) => {
    const account = currentAccount(res);
    const row = await getPrediction(db, account.id, req.params.id);
    if (!row) throw new NotFoundError(`Prediction ${req.params.id} not found`);
    const queue = row.status === 'starting' ? await queuePosition(deps, account, row.versionId, row) : undefined;
    res.json(predictionJson(await withOutputSoFar(db, row), deps.urls(req), queue));
  });

  // Warm-up progress of a starting prediction (what `kiln run` draws its progress bar from).
  router.get('/predictions/:id/setup', async (req, res) => {
    const row = await getPrediction(db, currentAccount(res).id, req.params.id);
    if (!row) throw new NotFoundError(`Prediction ${req.params.id} not found`);
    if (row.status !== 'starting') {
      res.json({ phase: null, status: row.status });
      return;
    }
    res.json({ ...(await setupProgress(deps.temporal, row.id)), status: row.status });
  });

  router.post('/predictions/:id/cancel', async (req, res) => {
    const account = currentAccount(res);
    const row = await getPrediction(db, account.id, req.params.id);
    if (!row) throw new NotFoundError(`Prediction ${req.params.id} not found`);
    if (!isTerminalStatus(row.status)) {
      try {
        await temporal.workflow.getHandle(predictionWorkflowId(row.id)).cancel();
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
    }
    const current = (await getPrediction(db, account.id, row.id)) ?? row;
    res.json(predictionJson(await withOutputSoFar(db, current), deps.urls(req)));
  });

  // A new run of the same workflow for a failed, canceled or aborted prediction (one id, every run in its history).
  router.post('/predictions/:id/retry', async (req, res) => {
    const account = currentAccount(res);
    const body = parseOr422(retryBody, req.body ?? {});
    const row = await getPrediction(db, account.id, req.params.id);
    if (!row) throw new NotFoundError(`Prediction ${req.params.id} not found`);
    const resolved = await resolveVersionField(account, body.version ?? row.versionId);
    const wait = holdPreferWait(deps.connections, req, res);
    const retried = await retryPrediction(deps, account, row, resolved, {
      priority: parsePriority(req.get('kiln-priority')),
      cancelAfterSeconds: parseCancelAfter(req.get('cancel-after')),
    });
    setRateLimitHeaders(res, retried.rateLimit);
    await respondCreated(req, res, retried.row, wait);
  });

  return router;
}
const created = { '201': jsonResponse('Created (or, with Prefer: wait, finished)', predictionBody), ...errorResponses };
const onePrediction = { '200': jsonResponse('The prediction', predictionBody), ...errorResponses };

export const predictionContracts: RouteContract[] = [
  {
    method: 'post',
    path: '/v1/predictions',
    summary: 'Create a prediction',
    request: { headers: predictionCreateHeaders, body: jsonContent(createBody) },
    responses: created,
  },
  {
    method: 'post',
    path: '/v1/models/{owner}/{name}/predictions',
    summary: "Create a prediction on a model's latest version",
    request: { params: pathParams('owner', 'name'), headers: predictionCreateHeaders, body: jsonContent(modelCreateBody) },
    responses: created,
  },
  {
    method: 'get',
    path: '/v1/predictions',
    summary: 'Your predictions, newest first',
    request: { query: listQuery },
    responses: { '200': jsonResponse('A page', pageOf(predictionBody)), ...errorResponses },
  },
  { method: 'get', path: '/v1/predictions/{id}', summary: 'A prediction', request: { params: pathParams('id') }, responses: onePrediction },
  {
    method: 'get',
    path: '/v1/predictions/{id}/setup',
    summary: "A starting prediction's warm-up: phase (queued, download, load, or null once started), file, bytes, total",
    request: { params: pathParams('id') },
    responses: { '200': jsonResponse('Warm-up progress', setupProgressBody), ...errorResponses },
  },
  {
    method: 'post',
    path: '/v1/predictions/{id}/cancel',
    summary: 'Cancel',
    request: { params: pathParams('id') },
    responses: onePrediction,
  },
  {
    method: 'post',
    path: '/v1/predictions/{id}/retry',
    summary:
      'Run a failed, canceled or aborted prediction again: a new run of its workflow, with the same input (and version, unless the body names one)',
    request: { params: pathParams('id'), headers: retryHeaders, body: jsonContent(retryBody) },
    responses: {
      '201': jsonResponse('The new run started (or, with Prefer: wait, finished); run_id names it', predictionBody),
      '409': jsonResponse('Starting, processing or succeeded: nothing to retry', errorBody),
      ...errorResponses,
    },
  },
];
