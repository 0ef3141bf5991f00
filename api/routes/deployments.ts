/**
 * Replicate's deployments: a stable `owner/name` for a model version, with min_instances kept
 * warm (never scaled to zero) and max_instances as the cap on replicas.
 */
import type { Client } from '@temporalio/client';
import { Router, type Request } from 'express';
import { z } from 'zod';
import { createDeployment, getDeployment, listDeployments, updateDeployment, type Deployment } from '../../db/deployments';
import { getVersion, resolveModelVersion } from '../../db/models';
import { models } from '../../db/schema';
import { eq } from 'drizzle-orm';
import { currentAccount } from '../auth';
import { setRateLimitHeaders } from '../admission-limits';
import { awaitPrediction } from '../await-prediction';
import type { EventHub } from '../event-hub';
import { createPrediction, type CreateDeps } from '../create-prediction';
import { ApiError, NotFoundError, ValidationError } from '../errors';
import { predictionJson, type UrlContext } from '../prediction-json';
import { parseOr422 } from '../validation';
import { modelCreateBody, parseCancelAfter, parsePriority, preferWaitSeconds } from './predictions';
import { notePrediction } from '../request-log';

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

export const updateDeploymentBody = z.strictObject({ version: z.string().regex(/^[a-f0-9]{64}$/).optional(), ...scaling });

export function deploymentRoutes(deps: CreateDeps & { temporal: Client; hub: EventHub; urls: (req: Request) => UrlContext }): Router {
  const router = Router();
  const { db } = deps;

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
    if (!resolved) throw new ValidationError([{ field: 'version', description: `no version ${body.version} of ${body.model} that you can use` }]);
    if (await getDeployment(db, account.username, body.name)) throw new ApiError(409, 'Conflict', `Deployment ${account.username}/${body.name} exists`);
    const d = await createDeployment(db, {
      ownerId: account.id,
      owner: account.username,
      name: body.name,
      modelId: resolved.model.id,
      versionId: resolved.version.id,
      hardware: body.hardware ?? 'cpu',
      minInstances: body.min_instances ?? 0,
      maxInstances: body.max_instances ?? 1,
    });
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
    const updated = await updateDeployment(db, d.id, {
      versionId: body.version ?? d.versionId,
      hardware: body.hardware ?? d.hardware,
      minInstances: min,
      maxInstances: max,
    });
    await warm(updated);
    res.json(await json(updated));
  });

  router.post('/deployments/:owner/:name/predictions', async (req, res) => {
    const account = currentAccount(res);
    const d = await mine(req, account.id);
    const body = parseOr422(modelCreateBody, req.body ?? {});
    const model = await db.query.models.findFirst({ where: eq(models.id, d.modelId) });
    const resolved = model ? await resolveModelVersion(db, account.id, { owner: model.owner, name: model.name, versionId: d.versionId }) : undefined;
    if (!resolved) throw new NotFoundError(`The deployment's model version is gone`);
    const { row, rateLimit } = await createPrediction(deps, account, resolved, body.input, {
      idempotencyKey: req.get('idempotency-key'),
      priority: parsePriority(req.get('kiln-priority')),
      webhook: body.webhook,
      webhookEventsFilter: body.webhook_events_filter,
      cancelAfterSeconds: parseCancelAfter(req.get('cancel-after')),
    });
    setRateLimitHeaders(res, rateLimit);
    const seconds = preferWaitSeconds(req.get('prefer'));
    const final = seconds ? await awaitPrediction(deps, row, { timeoutMs: seconds * 1000 }) : row;
    notePrediction(res, final.id);
    res.status(201).json(predictionJson(final, deps.urls(req)));
  });

  return router;
}
