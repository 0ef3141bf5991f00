/**
 * OpenAI-compatible endpoints under /openai/v1, so the `openai` clients work with a baseURL.
 * Every call is an ordinary prediction: it has a workflow in Temporal and a row in
 * `GET /v1/predictions`, and its id comes back in the `X-Kiln-Prediction-Id` header.
 */
import { and, asc, inArray } from 'drizzle-orm';
import express, { Router, type ErrorRequestHandler, type Request, type Response } from 'express';
import { z } from 'zod';
import type { Account } from '../../db/accounts';
import { resolveModelVersion, visibleTo, type ResolvedVersion } from '../../db/models';
import type { PredictionRow } from '../../db/predictions';
import { models } from '../../db/schema';
import type { Logger } from '../../lib/logger';
import { awaitPrediction } from '../await-prediction';
import { splitAdapterSuffix, withLora } from '../lora-adapters';
import { currentAccount, requireAuth } from '../auth';
import { createPrediction, type CreateDeps } from '../create-prediction';
import { ApiError, BadRequestError, NotFoundError, requestError, ValidationError } from '../errors';
import type { EventHub } from '../event-hub';
import { followPrediction } from '../prediction-stream';
import { SseWriter } from '../sse';
import { parseOr422 } from '../validation';
import { setRateLimitHeaders } from '../admission-limits';
import { parsePriority, parseSessionAffinity } from '../prediction-request';
import { rejectNulOutsideInput } from '../nul-guard';
import { jsonContent, jsonResponse, predictionCreateHeaders, type RouteContract } from '../route-contract';
import { chatCompletionBody, embeddingListBody, openAiErrorBody, openAiModelListBody, textCompletionBody } from '../openai-schemas';
import { contextLengthFailure } from '../context-length';
import { engineChat, mayBeToolCall, parseToolCalls, responseFormat, tool, toolCall, toolChoice, type Tool, type ToolMode } from '../openai-tools';

export interface OpenAiDeps extends CreateDeps {
  hub: EventHub;
  logger: Logger;
}

const MODEL_REF = /^([a-zA-Z0-9][\w.-]*)\/([a-zA-Z0-9][\w.-]*)(?::([a-f0-9]{64}))?$/;

const text = z.union([
  z.string(),
  z.array(z.object({ type: z.literal('text'), text: z.string() })).transform((parts) => parts.map((p) => p.text).join('')),
]);

const sampling = {
  model: z.string().min(1),
  max_tokens: z.number().int().min(1).max(8192).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  stop: z.union([z.string().min(1), z.array(z.string().min(1)).max(4)]).nullish(),
  seed: z.number().int().min(0).nullish(),
  // vLLM's extension: the end of text is held off until this many tokens are out.
  min_tokens: z.number().int().min(0).max(8192).nullish(),
  n: z.literal(1, { message: 'only n = 1 is supported' }).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
};

const chatMessage = z.discriminatedUnion('role', [
  z.object({ role: z.enum(['system', 'developer', 'user']), content: text }),
  z.object({ role: z.literal('assistant'), content: text.nullish(), tool_calls: z.array(toolCall).max(128).optional() }),
  z.object({ role: z.literal('tool'), content: text, tool_call_id: z.string().min(1) }),
]);

// Unknown fields (penalties, logprobs, user, …) are accepted and ignored, as most servers do.
export const chatBody = z
  .object({
    ...sampling,
    messages: z.array(chatMessage).min(1),
    max_completion_tokens: z.number().int().min(1).max(8192).nullish(),
    response_format: responseFormat.nullish(),
    tools: z.array(tool).max(128).nullish(),
    tool_choice: toolChoice.nullish(),
    parallel_tool_calls: z.boolean().nullish(),
  })
  .superRefine((b, ctx) => {
    const names = (b.tools ?? []).map((t) => t.function.name);
    const choice = b.tool_choice;
    if (choice && choice !== 'none' && names.length === 0) {
      ctx.addIssue({ code: 'custom', path: ['tool_choice'], message: 'needs tools to choose from' });
    }
    if (typeof choice === 'object' && choice && names.length > 0 && !names.includes(choice.function.name)) {
      ctx.addIssue({ code: 'custom', path: ['tool_choice', 'function', 'name'], message: `is not one of the tools (${names.join(', ')})` });
    }
  });

export const completionBody = z.object({
  ...sampling,
  prompt: z.union([z.string().min(1), z.array(z.string().min(1)).length(1).transform((p) => p[0])]),
});

export const embeddingsBody = z.object({
  model: z.string().min(1),
  input: z.union([z.string().min(1), z.array(z.string().min(1)).min(1).max(2048)]),
  encoding_format: z.enum(['float', 'base64']).optional(),
  dimensions: z.number().int().optional(),
});

type Sampling = z.infer<z.ZodObject<typeof sampling>>;

function samplingInput(body: Sampling, maxTokens: number | null | undefined) {
  return {
    max_tokens: maxTokens ?? 512,
    // OpenAI's defaults, not Replicate's.
    temperature: body.temperature ?? 1,
    top_p: body.top_p ?? 1,
    ...(body.stop != null ? { stop: body.stop } : {}),
    ...(body.seed != null ? { seed: body.seed } : {}),
    ...(body.min_tokens != null ? { min_tokens: body.min_tokens } : {}),
  };
}

const unix = (d: Date) => Math.floor(d.getTime() / 1000);
const outputText = (row: PredictionRow) => (Array.isArray(row.output) ? row.output.join('') : '');

function usage(row: PredictionRow) {
  const prompt = row.metrics.input_token_count ?? 0;
  const completion = row.metrics.output_token_count ?? 0;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: row.metrics.cached_tokens ?? 0 },
  };
}

type FinishReason = 'stop' | 'length' | 'tool_calls';

/** What may end an answer by length: max_tokens, or the model's context (which may cut max_tokens short). */
interface Limit {
  maxTokens: number;
  contextSize?: number;
}

const limitOf = (resolved: ResolvedVersion, maxTokens: number): Limit => {
  const contextSize = resolved.version.settings.contextSize;
  return { maxTokens, contextSize: typeof contextSize === 'number' ? contextSize : undefined };
};

function finishReason(row: PredictionRow, limit: Limit): 'stop' | 'length' {
  const output = row.metrics.output_token_count ?? 0;
  const used = (row.metrics.input_token_count ?? 0) + output;
  return output >= limit.maxTokens || (limit.contextSize !== undefined && used >= limit.contextSize) ? 'length' : 'stop';
}

/** OpenAI's 400 for a prompt longer than the context, or undefined for any other outcome. */
function contextLengthError(row: PredictionRow): ApiError | undefined {
  const failure = contextLengthFailure(row);
  if (!failure) return undefined;
  const param = failure.field.replace(/^input\./, '');
  return new ApiError(400, 'Bad request', `This model's maximum context length was exceeded: ${failure.description}`, {
    openai_code: 'context_length_exceeded',
    openai_param: param,
  });
}

/** How output events and the end of a prediction become stream chunks of one endpoint. */
interface StreamShape {
  chunk(delta: string | null, finish: FinishReason | null): unknown;
  text(data: string): unknown[];
  end(done: PredictionRow): unknown[];
}

/** Text deltas as they come, then the finish reason. */
function textShape(chunk: StreamShape['chunk'], limit: Limit): StreamShape {
  return { chunk, text: (data) => [chunk(data, null)], end: (done) => [chunk(null, finishReason(done, limit))] };
}

/**
 * A chat's stream where the answer may be tool calls: a forced call is held back whole and sent as
 * one `tool_calls` delta; an `auto` answer is held only while it could still be a call (it starts
 * with `{` or `[`), and streams as text from the moment it cannot.
 */
function toolCallShape(chunk: StreamShape['chunk'], limit: Limit, mode: ToolMode, tools: Tool[], callIdPrefix: string): StreamShape {
  let held = '';
  let holding = true;
  return {
    chunk,
    text(data) {
      if (!holding) return [chunk(data, null)];
      held += data;
      if (mode === 'forced' || mayBeToolCall(held)) return [];
      holding = false;
      return [chunk(held, null)];
    },
    end(done) {
      const calls = holding ? parseToolCalls(held.trim(), tools, callIdPrefix) : undefined;
      if (calls) {
        const delta = { tool_calls: calls.map((c, index) => ({ index, ...c })) };
        const base = chunk(null, null) as { choices: unknown[] };
        return [{ ...base, choices: [{ index: 0, delta, finish_reason: null, logprobs: null }] }, chunk(null, 'tool_calls')];
      }
      return [...(holding && held ? [chunk(held, null)] : []), chunk(null, finishReason(done, limit))];
    },
  };
}

/** OpenAI's error shape: `{ error: { message, type, param, code } }`. */
const openAiErrors: ErrorRequestHandler = (err, _req, res, next) => {
  if (res.headersSent) return next(err);
  let status = 500;
  let message = 'Internal server error';
  let param: string | null = null;
  if (err instanceof ValidationError) {
    status = 400;
    message = err.message;
    param = err.fields[0]?.field.replace(/^input\./, '') ?? null;
  } else {
    // Errors of the API's own (auth, rate limits) and of a malformed request (body, path).
    const e = requestError(err);
    if (!e) return next(err);
    status = e.status;
    message = e.message;
    param = (e.extra.openai_param as string | undefined) ?? (e.extra.invalid_fields as Array<{ field: string }> | undefined)?.[0]?.field ?? null;
    res.set(e.headers);
    if (typeof e.extra.openai_code === 'string') return void res.status(status).json({ error: { message, type: 'invalid_request_error', param, code: e.extra.openai_code } });
  }
  const type =
    status === 401
      ? 'authentication_error'
      : status === 404
        ? 'not_found_error'
        : status === 429
          ? 'rate_limit_error'
          : status >= 500
            ? 'server_error'
            : 'invalid_request_error';
  const code = status === 404 && /model/i.test(message) ? 'model_not_found' : status === 429 ? 'rate_limit_exceeded' : null;
  res.status(status).json({ error: { message, type, param, code } });
};

export function openaiRoutes(deps: OpenAiDeps): Router {
  const router = Router();
  // The token first: a client without one cannot make the server parse 10 MB of JSON.
  router.use(requireAuth(deps.db));
  router.use(express.json({ limit: '10mb' }));
  router.use(rejectNulOutsideInput);

  async function resolveModel(account: Account, ref: string, task: string): Promise<ResolvedVersion> {
    // `owner/base:adapter` runs a LoRA adapter of the base.
    const { model, adapter } = splitAdapterSuffix(ref);
    const m = MODEL_REF.exec(model);
    const base = m ? await resolveModelVersion(deps.db, account.id, { owner: m[1], name: m[2], versionId: m[3] }) : undefined;
    if (!base) throw new NotFoundError(`The model '${ref}' does not exist or you do not have access to it`);
    const resolved = adapter ? await withLora(deps.db, account, base, adapter, 'model') : base;
    if (resolved.version.task !== task) {
      throw new BadRequestError(`The model '${ref}' is a ${resolved.version.task} model, not ${task}`);
    }
    return resolved;
  }

  async function start(req: Request, res: Response, resolved: ResolvedVersion, input: Record<string, unknown>) {
    const { row, rateLimit } = await createPrediction(deps, currentAccount(res), resolved, input, {
      idempotencyKey: req.get('idempotency-key'),
      priority: parsePriority(req.get('kiln-priority')),
      session: parseSessionAffinity(req.get('x-session-affinity')),
    });
    setRateLimitHeaders(res, rateLimit);
    res.setHeader('X-Kiln-Prediction-Id', row.id);
    return row;
  }

  /** The whole answer once the prediction is done, or an OpenAI error if it did not succeed. */
  async function finished(req: Request, row: PredictionRow): Promise<PredictionRow> {
    const aborted = new AbortController();
    req.on('close', () => aborted.abort());
    const done = await awaitPrediction(deps, row, { signal: aborted.signal });
    const tooLong = contextLengthError(done);
    if (tooLong) throw tooLong;
    if (done.status !== 'succeeded') {
      throw new ApiError(500, 'Prediction failed', `prediction ${done.id} ${done.status}${done.error ? `: ${done.error}` : ''}`);
    }
    return done;
  }

  /**
   * Relays the prediction's output events as OpenAI chunks, then the finish, usage and [DONE].
   * The event stream opens with the first output (or the end): a prompt too long for the
   * context is then still an HTTP 400, as OpenAI answers it, not an error inside a 200 stream.
   */
  function stream(req: Request, res: Response, row: PredictionRow, shape: StreamShape, includeUsage: boolean, first?: unknown) {
    let sse: SseWriter | undefined;
    const open = (): SseWriter => {
      if (!sse) {
        sse = new SseWriter(res);
        // Stops its keep-alive when the client goes.
        sse.onClose(() => undefined);
        if (first) sse.data(JSON.stringify(first));
      }
      return sse;
    };
    const send = (chunks: unknown[]) => {
      if (chunks.length > 0) open();
      for (const c of chunks) sse?.data(JSON.stringify(c));
    };
    const streamError = (message: string) => open().data(JSON.stringify({ error: { message, type: 'server_error', param: null, code: null } }));
    let closed = false;
    /** The text sent cannot be taken back: a generation that starts over ends this stream. */
    let restarted = false;
    const stop = followPrediction(
      deps,
      row.id,
      0,
      (e) => {
        if (restarted) return;
        if (e.event === 'output') send(shape.text(e.data));
        if (e.event === 'error' && !contextLengthFailure({ status: 'failed', error: e.data })) streamError(e.data);
        if (e.event === 'reset') {
          // Only where a retry could not continue the text streamed so far (a workflow from before retries continued it).
          restarted = true;
          streamError(`the generation restarted after a node failure; the text above is void: ask again (prediction ${row.id})`);
          stop();
        }
      },
      async () => {
        if (closed) return;
        if (restarted) {
          open().data('[DONE]');
          open().end();
          return;
        }
        const done = await awaitPrediction(deps, row, { timeoutMs: 5_000 });
        const tooLong = contextLengthError(done);
        if (tooLong && !sse) {
          res.status(400).json({ error: { message: tooLong.message, type: 'invalid_request_error', param: tooLong.extra.openai_param, code: tooLong.extra.openai_code } });
          return;
        }
        if (done.status === 'succeeded') {
          send(shape.end(done));
          if (includeUsage) send([{ ...(shape.chunk(null, null) as object), choices: [], usage: usage(done) }]);
        }
        open().data('[DONE]');
        open().end();
      },
    );
    res.on('close', () => {
      closed = true;
      stop();
    });
  }

  router.get('/models', async (_req, res) => {
    const account = currentAccount(res);
    const rows = await deps.db
      .select()
      .from(models)
      .where(and(visibleTo(account.id), inArray(models.task, ['text-generation', 'embeddings'])))
      .orderBy(asc(models.owner), asc(models.name));
    res.json({
      object: 'list',
      data: rows
        .filter((m) => m.latestVersionId)
        .map((m) => ({ id: `${m.owner}/${m.name}`, object: 'model', created: unix(m.createdAt), owned_by: m.owner })),
    });
  });

  router.post('/chat/completions', async (req, res) => {
    const body = parseOr422(chatBody, req.body ?? {});
    const resolved = await resolveModel(currentAccount(res), body.model, 'text-generation');
    const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? 512;
    const { messages, json_schema, toolMode } = engineChat(body);
    const tools = body.tools ?? [];
    const row = await start(req, res, resolved, { messages, ...(json_schema ? { json_schema } : {}), ...samplingInput(body, maxTokens) });
    const id = `chatcmpl-${row.id}`;
    const created = unix(row.createdAt);
    if (body.stream) {
      const chunk = (content: string | null, finish: FinishReason | null) => ({
        id,
        object: 'chat.completion.chunk',
        created,
        model: body.model,
        choices: [{ index: 0, delta: content === null ? {} : { content }, finish_reason: finish, logprobs: null }],
      });
      const first = { ...chunk('', null), choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null, logprobs: null }] };
      const limit = limitOf(resolved, maxTokens);
      const shape = toolMode === 'none' ? textShape(chunk, limit) : toolCallShape(chunk, limit, toolMode, tools, row.id);
      return stream(req, res, row, shape, Boolean(body.stream_options?.include_usage), first);
    }
    const done = await finished(req, row);
    const text = outputText(done);
    const calls = toolMode === 'none' ? undefined : parseToolCalls(text.trim(), tools, row.id);
    res.json({
      id,
      object: 'chat.completion',
      created,
      model: body.model,
      choices: [
        {
          index: 0,
          message: calls ? { role: 'assistant', content: null, tool_calls: calls, refusal: null } : { role: 'assistant', content: text, refusal: null },
          finish_reason: calls ? 'tool_calls' : finishReason(done, limitOf(resolved, maxTokens)),
          logprobs: null,
        },
      ],
      usage: usage(done),
    });
  });

  router.post('/completions', async (req, res) => {
    const body = parseOr422(completionBody, req.body ?? {});
    const resolved = await resolveModel(currentAccount(res), body.model, 'text-generation');
    const maxTokens = body.max_tokens ?? 16;
    const row = await start(req, res, resolved, { prompt: body.prompt, ...samplingInput(body, maxTokens) });
    const id = `cmpl-${row.id}`;
    const created = unix(row.createdAt);
    const chunk = (content: string | null, finish: FinishReason | null) => ({
      id,
      object: 'text_completion',
      created,
      model: body.model,
      choices: [{ index: 0, text: content ?? '', finish_reason: finish, logprobs: null }],
    });
    if (body.stream) return stream(req, res, row, textShape(chunk, limitOf(resolved, maxTokens)), Boolean(body.stream_options?.include_usage));
    const done = await finished(req, row);
    res.json({ ...chunk(outputText(done), finishReason(done, limitOf(resolved, maxTokens))), usage: usage(done) });
  });

  router.post('/embeddings', async (req, res) => {
    const body = parseOr422(embeddingsBody, req.body ?? {});
    const resolved = await resolveModel(currentAccount(res), body.model, 'embeddings');
    const row = await start(req, res, resolved, { text: body.input });
    const done = await finished(req, row);
    const vectors = (done.output as number[][]) ?? [];
    if (body.dimensions !== undefined && body.dimensions !== vectors[0]?.length) {
      throw new BadRequestError(`This model makes ${vectors[0]?.length}-dimensional vectors; dimensions cannot change that`);
    }
    const encode = (v: number[]) =>
      body.encoding_format === 'base64' ? Buffer.from(new Float32Array(v).buffer).toString('base64') : v;
    const tokens = done.metrics.input_token_count ?? 0;
    res.json({
      object: 'list',
      data: vectors.map((v, index) => ({ object: 'embedding', index, embedding: encode(v) })),
      model: body.model,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    });
  });

  router.use((req, _res, next) => next(new NotFoundError(`No route for ${req.method} ${req.path}`)));
  router.use(openAiErrors);
  return router;
}

const openAiErrorResponses = {
  '400': jsonResponse('A field is wrong; error.param names it', openAiErrorBody),
  '401': jsonResponse('No valid token', openAiErrorBody),
  '404': jsonResponse('No such model (code model_not_found)', openAiErrorBody),
  '429': jsonResponse('Rate limit or cap; see Retry-After', openAiErrorBody),
  '500': jsonResponse('The prediction did not succeed', openAiErrorBody),
};
const orStream = (description: string, schema: z.ZodType) => ({
  description: `${description}; with stream: true, SSE chunks ending in data: [DONE]`,
  content: { 'application/json': { schema }, 'text/event-stream': { schema: z.string() } },
});

const generationHeaders = predictionCreateHeaders.pick({ 'idempotency-key': true, 'kiln-priority': true, 'x-session-affinity': true });

export const openaiContracts: RouteContract[] = [
  { method: 'get', path: '/openai/v1/models', summary: 'Models, OpenAI style', responses: { '200': jsonResponse('A list', openAiModelListBody), ...openAiErrorResponses } },
  {
    method: 'post',
    path: '/openai/v1/chat/completions',
    summary: 'OpenAI chat completions',
    request: { headers: generationHeaders, body: jsonContent(chatBody) },
    responses: { '200': orStream('chat.completion', chatCompletionBody), ...openAiErrorResponses },
  },
  {
    method: 'post',
    path: '/openai/v1/completions',
    summary: 'OpenAI completions',
    request: { headers: generationHeaders, body: jsonContent(completionBody) },
    responses: { '200': orStream('text_completion', textCompletionBody), ...openAiErrorResponses },
  },
  {
    method: 'post',
    path: '/openai/v1/embeddings',
    summary: 'OpenAI embeddings',
    request: { body: jsonContent(embeddingsBody) },
    responses: { '200': jsonResponse('A list of embeddings', embeddingListBody), ...openAiErrorResponses },
  },
];
