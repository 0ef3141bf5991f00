/**
 * The Responses API as Kiln predictions. A response is one prediction of a text-generation model,
 * on the same workflow and engine path as a chat completion; its row links `resp_<prediction id>`
 * to the request, its input items and the response it continues. Its status, output and stream
 * are read from the prediction, so a background response is as durable as any prediction.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Request, Response } from 'express';
import type { Account } from '../../db/accounts';
import type { Db } from '../../db/client';
import type { PredictionRow } from '../../db/predictions';
import { deleteResponse, getResponse, insertResponse, type ResponseRow } from '../../db/responses';
import { predictionWorkflowId } from '../../domain/contracts';
import { isTerminalStatus } from '../../domain/statuses';
import { newId } from '../../lib/ids';
import { awaitPrediction } from '../await-prediction';
import type { CreateDeps } from '../create-prediction';
import { ApiError, BadRequestError, NotFoundError, ValidationError } from '../errors';
import type { EventHub } from '../event-hub';
import type { OpenConnection } from '../open-connections';
import { parseSessionAffinity } from '../prediction-request';
import { parseOr422 } from '../validation';
import { inputFailureError } from './errors';
import { resolveModel, startPrediction } from './prediction';
import { conversationMessages, storedInputItems, type Turn } from './responses-conversation';
import {
  contextSizeOf,
  outputItems,
  type ResponseState,
  responseInput,
  responseObject,
  responsePlan,
  type StoredRequest,
} from './responses-object';
import { createResponseBody, type ResponseObject, type StoredInputItem } from './responses-protocol';
import { resolveItemReferences } from './responses-references';
import { streamResponse } from './responses-stream';

type Deps = CreateDeps & { hub: EventHub };

/** The longest chain of previous_response_id read back for one request. */
const MAX_CHAIN = 1000;

export const responseId = (predictionId: string) => `resp_${predictionId}`;

const stateOf = (row: ResponseRow): ResponseState => ({
  id: row.id,
  previousResponseId: row.previousResponseId,
  request: row.request as StoredRequest,
  contextSize: row.contextSize,
  createdAt: row.createdAt,
});

/** The account's response and its prediction; another account's id is a 404 exactly like a missing one. */
export async function ownResponse(db: Db, account: Account, id: string) {
  const found = await getResponse(db, account.id, id);
  if (!found) throw new NotFoundError(`No response found with id '${id}'.`);
  return { state: stateOf(found.response), row: found.response, prediction: found.prediction };
}

/**
 * The turns a response continues, oldest first, and the session its chain runs in. Each earlier
 * response must have finished: its output is part of the conversation.
 */
async function chainBefore(db: Db, account: Account, previousId: string): Promise<{ turns: Turn[]; session: string }> {
  const turns: Turn[] = [];
  let session: string | undefined;
  let id: string | null = previousId;
  while (id !== null) {
    if (turns.length >= MAX_CHAIN) throw new BadRequestError(`previous_response_id: the chain is longer than ${MAX_CHAIN} responses`);
    const found = await getResponse(db, account.id, id);
    if (!found) {
      const which = id === previousId ? `'${id}'` : `'${id}' (earlier in the chain)`;
      throw new ApiError(404, 'Not found', `No response found with id ${which}.`, { openai_param: 'previous_response_id' });
    }
    if (!isTerminalStatus(found.prediction.status))
      throw new ValidationError([{ field: 'previous_response_id', description: `response '${id}' has not finished yet` }]);
    const state = stateOf(found.response);
    turns.unshift({
      inputItems: found.response.inputItems as StoredInputItem[],
      outputItems: outputItems(found.prediction, responsePlan(state)),
    });
    session ??= found.response.session;
    id = found.response.previousResponseId;
  }
  return { turns, session: session! };
}

/** A stored response's items, its input then its output (none until it completed). */
async function itemsOfResponse(db: Db, account: Account, id: string) {
  const found = await getResponse(db, account.id, id);
  if (!found) return undefined;
  const output = outputItems(found.prediction, responsePlan(stateOf(found.response)));
  return [...(found.response.inputItems as StoredInputItem[]), ...output];
}

export interface Held {
  hold(kind: 'stream' | 'wait'): OpenConnection;
}

/**
 * The create body, or OpenAI's 400 naming the field by its whole path: the body's own `input` is
 * kept (`input.0.content`), where a prediction input's `input.` prefix is dropped on these routes.
 */
function parseCreateBody(value: unknown) {
  try {
    return parseOr422(createResponseBody, value);
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    throw new ApiError(400, 'Bad request', err.message, { openai_param: err.fields[0]?.field ?? null, ...err.extra });
  }
}

/** POST /responses: starts the prediction, then answers at once (background), with a stream, or when it ends. */
export async function createResponse(deps: Deps, req: Request, res: Response, account: Account, held: Held): Promise<void> {
  const body = parseCreateBody(req.body ?? {});
  const { input: given, ...request } = body;
  const resolved = await resolveModel(deps.db, account, body.model, 'text-generation');
  const chain = body.previous_response_id ? await chainBefore(deps.db, account, body.previous_response_id) : undefined;
  const items = await resolveItemReferences(given, chain?.turns ?? [], (id) => itemsOfResponse(deps.db, account, id));
  const contextSize = contextSizeOf(resolved);
  const newItems = storedInputItems(items, 'new');
  const messages = conversationMessages([...(chain?.turns ?? []), { inputItems: newItems, outputItems: [] }], body.instructions);
  const { input } = responseInput(request, messages, contextSize);
  // A chain keeps one session, so each turn goes to the node that has its prefix cached. A new
  // chain's first turn runs as a chat completion would, and opens the session where it runs.
  const kept = parseSessionAffinity(req.get('x-session-affinity')) ?? chain?.session;
  const session = kept ?? `chain_${newId()}`;
  const connection = body.background && !body.stream ? undefined : held.hold(body.stream ? 'stream' : 'wait');
  const prediction = await startPrediction(deps, req, res, resolved, input, {
    ...(kept !== undefined ? { session: kept } : { opensSession: session }),
    summary: `Responses API: ${body.model} for ${account.username}${body.previous_response_id ? `, continuing ${body.previous_response_id}` : ''}`,
  });
  const state: ResponseState = {
    id: responseId(prediction.id),
    previousResponseId: body.previous_response_id ?? null,
    request,
    contextSize,
    createdAt: prediction.createdAt,
  };
  if (body.store !== false) {
    await insertResponse(deps.db, {
      ...state,
      accountId: account.id,
      predictionId: prediction.id,
      session,
      inputItems: storedInputItems(items, prediction.id),
    });
  }
  if (body.stream) return streamResponse(deps, res, state, prediction, -1, connection!);
  if (body.background) return void res.json(responseObject(state, prediction));
  res.json(await finishedResponse(deps, req, state, prediction, connection!));
}

/** The response once its prediction ended; a prompt too long for the context is OpenAI's 400, as on chat completions. */
async function finishedResponse(
  deps: Deps,
  req: Request,
  state: ResponseState,
  prediction: PredictionRow,
  held: OpenConnection,
): Promise<ResponseObject> {
  const aborted = new AbortController();
  req.on('close', () => aborted.abort());
  const done = await awaitPrediction(deps, prediction, { signal: AbortSignal.any([aborted.signal, held.signal]) });
  held.throwIfWithdrawn();
  const tooLong = inputFailureError(done);
  if (tooLong) throw tooLong;
  return responseObject(state, done);
}

/** `starting_after` of a stream resumed: the sequence number of the last event the client has (-1: none). */
function startingAfter(value: unknown): number {
  if (value === undefined) return -1;
  const n = typeof value === 'string' && /^\d{1,9}$/.test(value) ? Number(value) : NaN;
  if (Number.isNaN(n)) throw new ValidationError([{ field: 'starting_after', description: 'must be a sequence number (an integer ≥ 0)' }]);
  return n;
}

/** GET /responses/{id}: the object, or with stream=true its events after starting_after. */
export async function retrieveResponse(deps: Deps, req: Request, res: Response, account: Account, held: Held): Promise<void> {
  const { state, prediction } = await ownResponse(deps.db, account, req.params.id as string);
  if (req.query.stream === 'true') {
    const after = startingAfter(req.query.starting_after);
    return streamResponse(deps, res, state, prediction, after, held.hold('stream'));
  }
  res.json(responseObject(state, prediction));
}

/** POST /responses/{id}/cancel: cancels its prediction's workflow (a finished one stays as it is) and answers once it ended. */
export async function cancelResponse(deps: Deps, account: Account, id: string): Promise<ResponseObject> {
  const { state, prediction } = await ownResponse(deps.db, account, id);
  if (isTerminalStatus(prediction.status)) return responseObject(state, prediction);
  try {
    await deps.temporal.workflow.getHandle(predictionWorkflowId(prediction.id)).cancel();
  } catch (err) {
    // It ended meanwhile, and Temporal has since dropped it.
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
  return responseObject(state, await awaitPrediction(deps, prediction, { timeoutMs: 10_000 }));
}

export async function removeResponse(db: Db, account: Account, id: string) {
  if (!(await deleteResponse(db, account.id, id))) throw new NotFoundError(`No response found with id '${id}'.`);
  return { id, object: 'response' as const, deleted: true as const };
}

/** GET /responses/{id}/input_items: the request's own items, newest first unless order=asc, in pages after an item id. */
export async function inputItems(db: Db, account: Account, id: string, query: Request['query']) {
  const { row } = await ownResponse(db, account, id);
  const order = query.order ?? 'desc';
  if (order !== 'asc' && order !== 'desc') throw new ValidationError([{ field: 'order', description: 'must be asc or desc' }]);
  const limit = query.limit === undefined ? 20 : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100)
    throw new ValidationError([{ field: 'limit', description: 'must be an integer from 1 to 100' }]);
  const all = order === 'asc' ? [...(row.inputItems as StoredInputItem[])] : [...(row.inputItems as StoredInputItem[])].reverse();
  const from = typeof query.after === 'string' ? all.findIndex((i) => i.id === query.after) + 1 : 0;
  const data = all.slice(from, from + limit);
  return {
    object: 'list' as const,
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: from + limit < all.length,
  };
}
