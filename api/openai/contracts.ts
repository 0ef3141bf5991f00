/** What /openapi.json says of the OpenAI-compatible routes: their bodies, headers and answers. */
import { z } from 'zod';
import { jsonContent, jsonResponse, predictionCreateHeaders, type RouteContract } from '../route-contract';
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
];
