import { eq } from 'drizzle-orm';
import { type Request, Router } from 'express';
import { z } from 'zod';
import { type Account, activeAccount } from '../../db/accounts';
import type { Db } from '../../db/client';
import type { PredictionEventRow } from '../../db/events';
import { predictions } from '../../db/schema';
import { renderFileRefs } from '../../lib/file-urls';
import { sha256Hex } from '../../lib/ids';
import { SharedReads } from '../../lib/shared-reads';
import type { UrlSigner } from '../../lib/signing';
import { bearerToken, optionalAccount } from '../auth';
import { NotFoundError, UnauthorizedError } from '../errors';
import type { EventHub } from '../event-hub';
import type { OpenConnections } from '../open-connections';
import { verifyStreamUrl } from '../prediction-json';
import { followPrediction } from '../prediction-stream';
import { watchQueuePlace } from '../queue-events';
import { errorBody } from '../response-schemas';
import { errorResponses, jsonResponse, pathParams, type RouteContract, signedUrlQuery } from '../route-contract';
import { SseWriter, sseFrame } from '../sse';

/**
 * Each event's frame, built once for all the streams of its prediction: caught-up streams share
 * one read, so they hold the same row objects, and a frame per stream per token would make one
 * account's streams cost the API work in proportion to their number.
 */
const frames = new WeakMap<PredictionEventRow, { base: string; frame: string }>();

/**
 * Streams that open together (a reconnect after a prediction ends, many tabs on one prediction)
 * ask the same questions of the database: each question in flight is asked once.
 */
const openReads = new SharedReads();

function frameOf(e: PredictionEventRow, base: string, signer: UrlSigner): string {
  const known = frames.get(e);
  if (known?.base === base) return known.frame;
  const frame = sseFrame({ id: e.seq, event: e.event, data: e.event === 'output' ? renderFileRefs(e.data, base, signer) : e.data });
  frames.set(e, { base, frame });
  return frame;
}

/**
 * `GET urls.stream`: Replicate's SSE events (`output`, `logs`, `error`, `done`). The URL is a
 * capability (signed, expiring), so clients need no token; a bearer token of the owner works as well.
 */
export function streamRoutes(deps: {
  db: Db;
  hub: EventHub;
  signer: UrlSigner;
  connections: OpenConnections;
  baseUrl: (req: Request) => string;
  /** KILN_ENGINE_SEQUENCES: the queue estimate's slots (queue events). */
  defaultSequences: number;
}): Router {
  const baseUrl = deps.baseUrl;
  const router = Router();

  router.get('/v1/predictions/:id/stream', async (req, res) => {
    const id = req.params.id;
    const [row] = await openReads.share(`owner ${id}`, () =>
      deps.db.select({ accountId: predictions.accountId }).from(predictions).where(eq(predictions.id, id)),
    );
    let owner: Account | undefined;
    let tokenHash: string | undefined;
    if (!verifyStreamUrl(deps.signer, id, req.query.expires, req.query.sig)) {
      const token = bearerToken(req);
      if (!token) {
        throw new UnauthorizedError(
          'The stream URL has expired or is not signed: read the prediction again for a fresh urls.stream, or pass a bearer token',
        );
      }
      tokenHash = sha256Hex(token);
      owner = await openReads.share(`token ${tokenHash}`, () => optionalAccount(deps.db, req));
      if (!owner) throw new UnauthorizedError();
      if (!row || row.accountId !== owner.id) throw new NotFoundError(`Prediction ${id} not found`);
    }
    if (!row) throw new NotFoundError(`Prediction ${id} not found`);
    // A signed URL answers to its account's state at each use: a disabled account's links stop working.
    const accountId = row.accountId;
    owner ??= await openReads.share(`account ${accountId}`, () => activeAccount(deps.db, accountId));
    if (!owner) throw new UnauthorizedError('The account this stream URL belongs to is disabled');
    const connection = deps.connections.hold('stream', owner, res, tokenHash);

    const lastEventId = Number(req.get('last-event-id') ?? 0);
    const sse = new SseWriter(res);
    const stop = followPrediction(
      deps,
      id,
      Number.isSafeInteger(lastEventId) && lastEventId > 0 ? lastEventId : 0,
      (e) => sse.sendFrame(frameOf(e, baseUrl(req), deps.signer)),
      () => sse.end(),
    );
    const stopQueue = watchQueuePlace(deps, owner, id, (place) => sse.send({ event: 'queue', data: JSON.stringify(place) }));
    // Said, not dropped: a client that reconnected at once would only get a 401.
    connection.signal.addEventListener('abort', () => {
      sse.send({ event: 'error', data: (connection.signal.reason as Error).message });
      stopQueue();
      stop();
    });
    sse.onClose(() => {
      stopQueue();
      stop();
    });
  });

  return router;
}

export const streamContracts: RouteContract[] = [
  {
    method: 'get',
    path: '/v1/predictions/{id}/stream',
    summary: 'Server-sent events of a prediction (use urls.stream: its signature is the permission, until it expires)',
    security: [{}, { bearer: [] }],
    request: { params: pathParams('id'), query: signedUrlQuery },
    responses: {
      '200': {
        description: 'text/event-stream: output, logs, error, done, reset; queue (no id) while it waits to start, with its place as in GET',
        content: { 'text/event-stream': { schema: z.string() } },
      },
      '401': jsonResponse('Expired or unsigned, and no token; or the account is disabled', errorBody),
      '404': errorResponses['404'],
      '429': jsonResponse('The account holds as many open streams as it may (max_open_streams)', errorBody),
    },
  },
];
