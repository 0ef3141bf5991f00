import { Router } from 'express';
import { z } from 'zod';
import { type Account, createApiToken, listApiTokens, revokeApiToken } from '../../db/accounts';
import { heldAdmissions, queuedPredictions } from '../../db/admissions';
import type { Db } from '../../db/client';
import { usageByDayAndModel } from '../../db/usage';
import { rateLimitFor, taskNames } from '../../domain/tasks';
import { currentAccount } from '../auth';
import { NotFoundError } from '../errors';
import type { OpenConnections } from '../open-connections';
import { accountBody, newTokenBody, revokedTokenBody, tokenListBody, usageBody } from '../response-schemas';
import { errorResponses, jsonContent, jsonResponse, pathParams, type RouteContract } from '../route-contract';
import { parseOr422 } from '../validation';

export const tokenBody = z.strictObject({ name: z.string().trim().min(1).max(100).default('api') });

const usageQuery = z.object({
  start: z.iso.date().optional().describe('First day, YYYY-MM-DD (default: 30 days ago)'),
  end: z.iso.date().optional().describe('Last day, YYYY-MM-DD, included (default: today)'),
});

const DAY = 86_400_000;

/** Replicate's `GET /v1/account`, with the account's limits and current load. */
async function accountJson(db: Db, connections: OpenConnections, a: Account) {
  return {
    type: a.type,
    username: a.username,
    name: a.name,
    created_at: a.createdAt.toISOString(),
    limits: {
      max_running: a.maxRunning,
      max_queued: a.maxQueued,
      over_cap: a.overCap,
      fairness_weight: a.fairnessWeight,
      max_pinned_replicas: a.maxPinnedReplicas,
      max_queue_seconds: a.maxQueueSeconds,
      max_open_streams: connections.capOf('stream', a),
      max_waiting_requests: connections.capOf('wait', a),
      rate_limits_per_minute: Object.fromEntries(taskNames().map((t) => [t, rateLimitFor(t, a.rateLimits)])),
    },
    current: { admitted: await heldAdmissions(db, a.id), queued: await queuedPredictions(db, a.id) },
  };
}

export function accountRoutes(deps: { db: Db; connections: OpenConnections }): Router {
  const router = Router();
  const { db } = deps;

  router.get('/account', async (_req, res) => {
    res.json(await accountJson(db, deps.connections, currentAccount(res)));
  });

  /** The token in clear is in this answer and nowhere else, ever: only its hash is kept. */
  router.post('/account/tokens', async (req, res) => {
    const body = parseOr422(tokenBody, req.body ?? {});
    const { id, token } = await createApiToken(db, currentAccount(res).id, body.name);
    res.status(201).json({ id, name: body.name, token, prefix: token.slice(0, 9) });
  });

  router.get('/account/tokens', async (_req, res) => {
    const rows = await listApiTokens(db, currentAccount(res).id);
    res.json({
      results: rows.map((t) => ({
        id: t.id,
        name: t.name,
        prefix: t.prefix,
        created_at: t.createdAt.toISOString(),
        last_used_at: t.lastUsedAt?.toISOString() ?? null,
        revoked_at: t.revokedAt?.toISOString() ?? null,
      })),
    });
  });

  router.delete('/account/tokens/:id', async (req, res) => {
    const row = await revokeApiToken(db, currentAccount(res).id, req.params.id);
    if (!row) throw new NotFoundError(`Token ${req.params.id} not found`);
    res.json({ id: row.id, revoked_at: row.revokedAt?.toISOString() ?? null });
  });

  /** Usage summed by day (UTC) and model. */
  router.get('/account/usage', async (req, res) => {
    const q = parseOr422(usageQuery, req.query);
    const end = q.end ? new Date(Date.parse(q.end) + DAY) : new Date(Math.floor(Date.now() / DAY) * DAY + DAY);
    const start = q.start ? new Date(q.start) : new Date(end.getTime() - 31 * DAY);
    const results = await usageByDayAndModel(db, currentAccount(res).id, start, end);
    res.json({ start: start.toISOString().slice(0, 10), end: new Date(end.getTime() - DAY).toISOString().slice(0, 10), results });
  });

  return router;
}

export const accountContracts: RouteContract[] = [
  {
    method: 'get',
    path: '/v1/account',
    summary: 'Your account, limits and load',
    responses: { '200': jsonResponse('The account', accountBody), ...errorResponses },
  },
  {
    method: 'post',
    path: '/v1/account/tokens',
    summary: 'A new token, shown once',
    request: { body: jsonContent(tokenBody) },
    responses: { '201': jsonResponse('The token', newTokenBody), ...errorResponses },
  },
  {
    method: 'get',
    path: '/v1/account/tokens',
    summary: 'Your tokens (never their secret)',
    responses: { '200': jsonResponse('Tokens', tokenListBody), ...errorResponses },
  },
  {
    method: 'delete',
    path: '/v1/account/tokens/{id}',
    summary: 'Revoke a token',
    request: { params: pathParams('id') },
    responses: { '200': jsonResponse('Revoked', revokedTokenBody), ...errorResponses },
  },
  {
    method: 'get',
    path: '/v1/account/usage',
    summary: 'Usage by day (UTC) and model',
    request: { query: usageQuery },
    responses: { '200': jsonResponse('Usage', usageBody), ...errorResponses },
  },
];
