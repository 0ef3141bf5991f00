/**
 * The Kiln prediction behind each OpenAI call: the model the request names, resolved to a version
 * the account may run; the prediction started with the request's headers; its end awaited.
 * Every call is an ordinary prediction, with a workflow in Temporal and a row in
 * `GET /v1/predictions`, and its id goes back in the `X-Kiln-Prediction-Id` header.
 */
import type { Request, Response } from 'express';
import type { Account } from '../../db/accounts';
import type { Db } from '../../db/client';
import { type ResolvedVersion, resolveModelVersion } from '../../db/models';
import type { PredictionRow } from '../../db/predictions';
import { setRateLimitHeaders } from '../admission-limits';
import { currentAccount } from '../auth';
import { awaitPrediction } from '../await-prediction';
import { type CreateDeps, createPrediction } from '../create-prediction';
import { ApiError, BadRequestError, NotFoundError } from '../errors';
import type { EventHub } from '../event-hub';
import { splitAdapterSuffix, withLora } from '../lora-adapters';
import type { OpenConnection } from '../open-connections';
import { maxQueueSeconds, parsePriority, parseSessionAffinity } from '../prediction-request';
import { inputFailureError } from './errors';

const MODEL_REF = /^([a-zA-Z0-9][\w.-]*)\/([a-zA-Z0-9][\w.-]*)(?::([a-f0-9]{64}))?$/;

/** The version `ref` names (`owner/name`, with `:<version id>` or `:<adapter>`), which must be a model of `task`. */
export async function resolveModel(db: Db, account: Account, ref: string, task: string): Promise<ResolvedVersion> {
  // `owner/base:adapter` runs a LoRA adapter of the base.
  const { model, adapter } = splitAdapterSuffix(ref);
  const m = MODEL_REF.exec(model);
  const base = m ? await resolveModelVersion(db, account.id, { owner: m[1], name: m[2], versionId: m[3] }) : undefined;
  if (!base) throw new NotFoundError(`The model '${ref}' does not exist or you do not have access to it`);
  const resolved = adapter ? await withLora(db, account, base, adapter, 'model') : base;
  if (resolved.version.task !== task) {
    throw new BadRequestError(`The model '${ref}' is a ${resolved.version.task} model, not ${task}`);
  }
  return resolved;
}

/**
 * Starts the prediction (in `opts.session`, else the x-session-affinity header's; with neither, it
 * may open `opts.opensSession`); its rate limit and id go into the response's headers.
 */
export async function startPrediction(
  deps: CreateDeps,
  req: Request,
  res: Response,
  resolved: ResolvedVersion,
  input: Record<string, unknown>,
  opts: { session?: string; opensSession?: string; summary?: string } = {},
): Promise<PredictionRow> {
  const { row, rateLimit } = await createPrediction(deps, currentAccount(res), resolved, input, {
    idempotencyKey: req.get('idempotency-key'),
    priority: parsePriority(req.get('kiln-priority')),
    maxQueueSeconds: maxQueueSeconds(undefined, req.get('max-queue-time')),
    session: opts.session ?? parseSessionAffinity(req.get('x-session-affinity')),
    opensSession: opts.opensSession,
    summary: opts.summary,
  });
  setRateLimitHeaders(res, rateLimit);
  res.setHeader('X-Kiln-Prediction-Id', row.id);
  return row;
}

/**
 * The prediction once it succeeded (waiting no longer than the client does, nor past the
 * withdrawal of its token or account: a 401), or the error to answer.
 */
export async function finishedPrediction(
  deps: { db: Db; hub: EventHub },
  req: Request,
  row: PredictionRow,
  held: OpenConnection,
): Promise<PredictionRow> {
  const aborted = new AbortController();
  req.on('close', () => aborted.abort());
  const done = await awaitPrediction(deps, row, { signal: AbortSignal.any([aborted.signal, held.signal]) });
  held.throwIfWithdrawn();
  const tooLong = inputFailureError(done);
  if (tooLong) throw tooLong;
  if (done.status !== 'succeeded') {
    throw new ApiError(500, 'Prediction failed', `prediction ${done.id} ${done.status}${done.error ? `: ${done.error}` : ''}`);
  }
  return done;
}
