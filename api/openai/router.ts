/**
 * OpenAI-compatible endpoints under /openai/v1, so the `openai` clients work with a baseURL.
 * Each route parses its body, hands it to its serving module and writes the answer: JSON, or an
 * event stream with `stream: true`. Errors go out in OpenAI's shape.
 */
import express, { type Response, Router } from 'express';
import type { Logger } from '../../lib/logger';
import { currentAccount, currentTokenHash, requireAuth } from '../auth';
import type { CreateDeps } from '../create-prediction';
import { NotFoundError } from '../errors';
import type { EventHub } from '../event-hub';
import { rejectNulOutsideInput } from '../nul-guard';
import type { ConnectionKind, OpenConnections } from '../open-connections';
import { parseOr422 } from '../validation';
import { openAiErrors } from './errors';
import { finishedPrediction, resolveModel, startPrediction } from './prediction';
import { chatBody, completionBody, embeddingsBody } from './protocol';
import { chatCompletion, chatPlan, chatStream } from './serving-chat';
import { completionPlan, completionStream, textCompletion } from './serving-completions';
import { embeddingList, embeddingsInput } from './serving-embeddings';
import { listModels } from './serving-models';
import { cancelResponse, createResponse, inputItems, removeResponse, retrieveResponse } from './serving-responses';
import { streamPrediction } from './stream';

export interface OpenAiDeps extends CreateDeps {
  hub: EventHub;
  connections: OpenConnections;
  logger: Logger;
}

export function openaiRoutes(deps: OpenAiDeps): Router {
  const router = Router();
  // The token first: a client without one cannot make the server parse 10 MB of JSON.
  router.use(requireAuth(deps.db));
  router.use(express.json({ limit: '10mb' }));
  router.use(rejectNulOutsideInput);
  /** Every call holds the answer open (a stream, or a wait for the end): one of the account's, taken before its prediction starts. */
  const hold = (kind: ConnectionKind, res: Response) => deps.connections.hold(kind, currentAccount(res), res, currentTokenHash(res));

  router.get('/models', async (_req, res) => {
    res.json(await listModels(deps.db, currentAccount(res)));
  });

  router.post('/chat/completions', async (req, res) => {
    const body = parseOr422(chatBody, req.body ?? {});
    const resolved = await resolveModel(deps.db, currentAccount(res), body.model, 'text-generation');
    const plan = chatPlan(body, resolved);
    const held = hold(body.stream ? 'stream' : 'wait', res);
    const row = await startPrediction(deps, req, res, resolved, plan.input);
    if (body.stream) return streamPrediction(deps, res, row, chatStream(plan, row), Boolean(body.stream_options?.include_usage), held);
    res.json(chatCompletion(plan, row, await finishedPrediction(deps, req, row, held)));
  });

  router.post('/completions', async (req, res) => {
    const body = parseOr422(completionBody, req.body ?? {});
    const resolved = await resolveModel(deps.db, currentAccount(res), body.model, 'text-generation');
    const plan = completionPlan(body, resolved);
    const held = hold(body.stream ? 'stream' : 'wait', res);
    const row = await startPrediction(deps, req, res, resolved, plan.input);
    if (body.stream)
      return streamPrediction(deps, res, row, completionStream(plan, row), Boolean(body.stream_options?.include_usage), held);
    res.json(textCompletion(plan, row, await finishedPrediction(deps, req, row, held)));
  });

  router.post('/embeddings', async (req, res) => {
    const body = parseOr422(embeddingsBody, req.body ?? {});
    const resolved = await resolveModel(deps.db, currentAccount(res), body.model, 'embeddings');
    const held = hold('wait', res);
    const row = await startPrediction(deps, req, res, resolved, embeddingsInput(body));
    res.json(embeddingList(body, await finishedPrediction(deps, req, row, held)));
  });

  const holder = (res: Response) => ({ hold: (kind: ConnectionKind) => hold(kind, res) });
  router.post('/responses', (req, res) => createResponse(deps, req, res, currentAccount(res), holder(res)));
  router.get('/responses/:id', (req, res) => retrieveResponse(deps, req, res, currentAccount(res), holder(res)));
  router.post('/responses/:id/cancel', async (req, res) => {
    res.json(await cancelResponse(deps, currentAccount(res), req.params.id));
  });
  router.delete('/responses/:id', async (req, res) => {
    res.json(await removeResponse(deps.db, currentAccount(res), req.params.id));
  });
  router.get('/responses/:id/input_items', async (req, res) => {
    res.json(await inputItems(deps.db, currentAccount(res), req.params.id, req.query));
  });

  router.use((req, _res, next) => next(new NotFoundError(`No route for ${req.method} ${req.path}`)));
  router.use(openAiErrors(deps.logger));
  return router;
}
