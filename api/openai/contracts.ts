/** What /openapi.json says of the OpenAI-compatible routes: their bodies, headers and answers. */
import { z } from 'zod';
import { jsonContent, jsonResponse, pathParams, predictionCreateHeaders, type RouteContract } from '../route-contract';
import {
  chatBody,
  chatCompletionBody,
  completionBody,
  embeddingListBody,
  embeddingsBody,
  openAiErrorBody,
  openAiModelListBody,
  textCompletionBody,
} from './protocol';
import { createResponseBody, deletedResponseBody, inputItemListBody, responseBody } from './responses-protocol';

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
  {
    method: 'get',
    path: '/openai/v1/models',
    summary: 'Models, OpenAI style',
    responses: { '200': jsonResponse('A list', openAiModelListBody), ...openAiErrorResponses },
  },
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
  {
    method: 'post',
    path: '/openai/v1/responses',
    summary:
      'OpenAI Responses API: one prediction of a text-generation model; background: true answers at once (status queued), stream: true sends its events with sequence numbers',
    request: { headers: generationHeaders, body: jsonContent(createResponseBody) },
    responses: {
      '200': {
        description: 'The response; with stream: true, SSE events (response.created … response.completed)',
        content: { 'application/json': { schema: responseBody }, 'text/event-stream': { schema: z.string() } },
      },
      ...openAiErrorResponses,
    },
  },
  {
    method: 'get',
    path: '/openai/v1/responses/{id}',
    summary: 'A response; with stream=true, its events after starting_after (a sequence number), then the live ones',
    request: {
      params: pathParams('id'),
      query: z.object({ stream: z.enum(['true', 'false']).optional(), starting_after: z.string().regex(/^\d+$/).optional() }),
    },
    responses: {
      '200': {
        description: 'The response, or its SSE events',
        content: { 'application/json': { schema: responseBody }, 'text/event-stream': { schema: z.string() } },
      },
      ...openAiErrorResponses,
    },
  },
  {
    method: 'post',
    path: '/openai/v1/responses/{id}/cancel',
    summary: 'Cancel a response (its prediction); a finished one is answered as it is',
    request: { params: pathParams('id') },
    responses: { '200': jsonResponse('The response', responseBody), ...openAiErrorResponses },
  },
  {
    method: 'delete',
    path: '/openai/v1/responses/{id}',
    summary: 'Delete a stored response (its prediction stays, as the usage record)',
    request: { params: pathParams('id') },
    responses: { '200': jsonResponse('Deleted', deletedResponseBody), ...openAiErrorResponses },
  },
  {
    method: 'get',
    path: '/openai/v1/responses/{id}/input_items',
    summary: "The response's own input items, newest first unless order=asc",
    request: {
      params: pathParams('id'),
      query: z.object({ order: z.enum(['asc', 'desc']).optional(), limit: z.string().optional(), after: z.string().optional() }),
    },
    responses: { '200': jsonResponse('A page of items', inputItemListBody), ...openAiErrorResponses },
  },
];
