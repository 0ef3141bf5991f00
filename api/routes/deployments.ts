/**
 * Replicate's deployments: a stable `owner/name` for a model version, with min_instances kept
 * warm (never scaled to zero) and max_instances as the cap on replicas. Pinned replicas hold
 * engine memory for one account at everyone else's expense, so they are bounded twice: the sum of
 * an account's min_instances by its max_pinned_replicas quota (refused here), and the memory one
 * account pins on one node by KILN_PINNED_NODE_SHARE (a replica bigger than that share is
 * refused here; several that add up past it are left unpinned by the node, workers/pinned-replicas.ts).
 */
import type { Client } from '@temporalio/client';
import { eq } from 'drizzle-orm';
import { type Request, Router } from 'express';
import { z } from 'zod';
import {
  createDeployment,
  type Deployment,
  getDeployment,
  listDeployments,
  PinnedQuotaExceeded,
  updateDeployment,
  withinPinnedQuota,
} from '../../db/deployments';
import type { Tx } from '../../db/events';
import { getVersion, type ModelVersion, resolveModelVersion } from '../../db/models';
import { liveNodes } from '../../db/nodes';
import { models } from '../../db/schema';
import { setRateLimitHeaders } from '../admission-limits';
import { currentAccount } from '../auth';
import { type CreateDeps, createPrediction } from '../create-prediction';
import { ApiError, NotFoundError, ValidationError } from '../errors';
import type { EventHub } from '../event-hub';
import { throwIfInputFailed } from '../input-failure';
import type { OpenConnections } from '../open-connections';
import { withOutputSoFar } from '../output-so-far';
import { predictionJson, type UrlContext } from '../prediction-json';
import { modelCreateBody, predictionCreateOptions } from '../prediction-request';
import { holdPreferWait, waitAsAsked } from '../prefer-wait';
import { notePrediction } from '../request-log';
import { deploymentBody, errorBody, predictionBody } from '../response-schemas';
import {
  errorResponses,
  jsonContent,
  jsonResponse,
  pageOf,
  pathParams,
  predictionCreateHeaders,
  type RouteContract,
} from '../route-contract';
import { parseOr422 } from '../validation';

const scaling = {
  hardware: z.string().min(1).max(50).optional().describe("Accepted for Replicate's clients; placement decides"),
  min_instances: z.number().int().min(0).max(16).optional(),
  max_instances: z.number().int().min(1).max(16).optional(),
};

export const createDeploymentBody = z
  .strictObject({
    name: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,99}$/, 'lower-case letters, digits, dots, dashes and underscores'),
    model: z.string().regex(/^[^/]+\/[^/]+$/, 'owner/name'),
    version: z.string().regex(/^[a-f0-9]{64}$/, 'a version id'),
    ...scaling,
  })
  .refine((d) => (d.min_instances ?? 0) <= (d.max_instances ?? 1), { message: 'must not exceed max_instances', path: ['min_instances'] });

export const updateDeploymentBody = z.strictObject({
  version: z
    .string()
    .regex(/^[a-f0-9]{64}$/)
    .optional(),
  ...scaling,
});

export function deploymentRoutes(
  deps: CreateDeps & {
    temporal: Client;
    hub: EventHub;
    connections: OpenConnections;
    urls: (req: Request) => UrlContext;
    pinnedNodeShare: number;
  },
): Router {
  const router = Router();
  const { db } = deps;

  /** Refuses min_instances that one replica of the version could never be given on a node. */
  async function checkPinnable(version: ModelVersion, minInstances: number) {
    if (minInstances === 0) return;
    const largest = Math.max(0, ...(await liveNodes(db)).map((n) => n.memoryBytes));
    const allowed = Math.floor(largest * deps.pinnedNodeShare);
    if (largest > 0 && version.memoryBytes > allowed) {
      throw new ValidationError([
        {
          field: 'min_instances',
          description: `a replica of this version needs ${version.memoryBytes} bytes; one account may pin at most ${allowed} bytes of a node (${deps.pinnedNodeShare} of the largest): use min_instances 0`,
        },
      ]);
    }
  }

  /** The write, if the account's quota of pinned replicas allows it; a 422 naming min_instances and the quota if not. */
  async function withinQuota<T>(change: Parameters<typeof withinPinnedQuota>[1], write: (tx: Tx) => Promise<T>): Promise<T> {
    try {
      return await withinPinnedQuota(db, change, write);
    } catch (err) {
      if (!(err instanceof PinnedQuotaExceeded)) throw err;
      throw new ValidationError([
        {
          field: 'min_instances',
          description: `your deployments would pin ${err.pinned} replicas; your account's quota (max_pinned_replicas) is ${err.quota}`,
        },
      ]);
    }
  }

  async function json(d: Deployment) {
    const model = await db.query.models.findFirst({ where: eq(models.id, d.modelId) });
    return {
      owner: d.owner,
      name: d.name,
      current_release: {
        number: d.release,
        model: model ? `${model.owner}/${model.name}` : null,
        version: d.versionId,
        created_at: d.updatedAt.toISOString(),
        configuration: { hardware: d.hardware, min_instances: d.minInstances, max_instances: d.maxInstances },
      },
    };
  }

  /** Loads min_instances replicas now, so the first prediction is warm. */
  async function warm(d: Deployment) {
    if (d.minInstances === 0) return;
    await deps.temporal.workflow.start('warmDeploymentWorkflow', {
      workflowId: `warm-${d.id}-${d.release}`,
      taskQueue: deps.controlQueue,
      args: [{ versionId: d.versionId, replicas: d.minInstances }],
    });
  }

  async function mine(req: Request, accountId: string): Promise<Deployment> {
    const d = await getDeployment(db, String(req.params.owner), String(req.params.name));
    if (!d || d.ownerId !== accountId) throw new NotFoundError(`Deployment ${req.params.owner}/${req.params.name} not found`);
    return d;
  }

  router.post('/deployments', async (req, res) => {
    const account = currentAccount(res);
    const body = parseOr422(createDeploymentBody, req.body ?? {});
    const [owner, name] = body.model.split('/');
    const resolved = await resolveModelVersion(db, account.id, { owner, name, versionId: body.version });
    if (!resolved)
      throw new ValidationError([{ field: 'version', description: `no version ${body.version} of ${body.model} that you can use` }]);
    if (await getDeployment(db, account.username, body.name))
      throw new ApiError(409, 'Conflict', `Deployment ${account.username}/${body.name} exists`);
    const minInstances = body.min_instances ?? 0;
    await checkPinnable(resolved.version, minInstances);
    const d = await withinQuota({ accountId: account.id, minInstances }, (tx) =>
      createDeployment(tx, {
        ownerId: account.id,
        owner: account.username,
        name: body.name,
        modelId: resolved.model.id,
        versionId: resolved.version.id,
        hardware: body.hardware ?? 'cpu',
        minInstances,
        maxInstances: body.max_instances ?? 1,
      }),
    );
    await warm(d);
    res.status(201).json(await json(d));
  });

  router.get('/deployments', async (_req, res) => {
    const rows = await listDeployments(db, currentAccount(res).id);
    res.json({ next: null, previous: null, results: await Promise.all(rows.map(json)) });
  });

  router.get('/deployments/:owner/:name', async (req, res) => {
    res.json(await json(await mine(req, currentAccount(res).id)));
  });

  router.patch('/deployments/:owner/:name', async (req, res) => {
    const d = await mine(req, currentAccount(res).id);
    const body = parseOr422(updateDeploymentBody, req.body ?? {});
    const min = body.min_instances ?? d.minInstances;
    const max = body.max_instances ?? d.maxInstances;
    if (min > max) throw new ValidationError([{ field: 'min_instances', description: 'must not exceed max_instances' }]);
    if (body.version) {
      const v = await getVersion(db, body.version);
      if (!v || v.modelId !== d.modelId) throw new ValidationError([{ field: 'version', description: 'not a version of this model' }]);
    }
    // The current version may be gone (its model deleted): min_instances can still be lowered.
    const version = await getVersion(db, body.version ?? d.versionId);
    if (version) await checkPinnable(version, min);
    const updated = await withinQuota({ accountId: d.ownerId, minInstances: min, deploymentId: d.id }, (tx) =>
      updateDeployment(tx, d.id, {
        versionId: body.version ?? d.versionId,
        hardware: body.hardware ?? d.hardware,
        minInstances: min,
        maxInstances: max,
      }),
    );
    await warm(updated);
    res.json(await json(updated));
  });

  router.post('/deployments/:owner/:name/predictions', async (req, res) => {
    const account = currentAccount(res);
    const d = await mine(req, account.id);
    const body = parseOr422(modelCreateBody, req.body ?? {});
    const model = await db.query.models.findFirst({ where: eq(models.id, d.modelId) });
    const resolved = model
      ? await resolveModelVersion(db, account.id, { owner: model.owner, name: model.name, versionId: d.versionId })
      : undefined;
    if (!resolved) throw new NotFoundError(`The deployment's model version is gone`);
    const wait = holdPreferWait(deps.connections, req, res);
    const options = predictionCreateOptions(body, (name) => req.get(name));
    const { row, rateLimit } = await createPrediction(deps, account, resolved, body.input, options);
    setRateLimitHeaders(res, rateLimit);
    const final = await withOutputSoFar(db, await waitAsAsked(deps, req, row, wait));
    notePrediction(res, final.id);
    throwIfInputFailed(final);
    res.status(201).json(predictionJson(final, deps.urls(req)));
  });

  return router;
}

const deploymentParams = pathParams('owner', 'name');

export const deploymentContracts: RouteContract[] = [
  {
    method: 'get',
    path: '/v1/deployments',
    summary: 'Your deployments',
    responses: { '200': jsonResponse('A page', pageOf(deploymentBody)), ...errorResponses },
  },
  {
    method: 'post',
    path: '/v1/deployments',
    summary:
      "Create a deployment. The min_instances of all your deployments count against your account's max_pinned_replicas (422 naming min_instances past it)",
    request: { body: jsonContent(createDeploymentBody) },
    responses: { '201': jsonResponse('Created', deploymentBody), '409': jsonResponse('It exists', errorBody), ...errorResponses },
  },
  {
    method: 'get',
    path: '/v1/deployments/{owner}/{name}',
    summary: 'A deployment',
    request: { params: deploymentParams },
    responses: { '200': jsonResponse('The deployment', deploymentBody), ...errorResponses },
  },
  {
    method: 'patch',
    path: '/v1/deployments/{owner}/{name}',
    summary: 'A new release (min_instances within your max_pinned_replicas)',
    request: { params: deploymentParams, body: jsonContent(updateDeploymentBody) },
    responses: { '200': jsonResponse('The deployment', deploymentBody), ...errorResponses },
  },
  {
    method: 'post',
    path: '/v1/deployments/{owner}/{name}/predictions',
    summary: "Create a prediction on a deployment's current release",
    request: { params: deploymentParams, headers: predictionCreateHeaders, body: jsonContent(modelCreateBody) },
    responses: { '201': jsonResponse('Created (or, with Prefer: wait, finished)', predictionBody), ...errorResponses },
  },
];
