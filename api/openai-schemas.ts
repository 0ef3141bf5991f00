/**
 * The JSON bodies of the OpenAI-compatible routes (/openai/v1), in OpenAI's shapes, as zod schemas:
 * the routes' contracts name them and the `openai` client tests check each response against them.
 */
import { z } from 'zod';

const usage = z.object({
  prompt_tokens: z.number().int(),
  completion_tokens: z.number().int(),
  total_tokens: z.number().int(),
  prompt_tokens_details: z.object({ cached_tokens: z.number().int().describe('Prompt tokens already evaluated on the node (prefix caching)') }),
});
const finishReason = z.enum(['stop', 'length', 'tool_calls']).nullable();
const toolCallBody = z.object({
  id: z.string(),
  type: z.literal('function'),
  function: z.object({ name: z.string(), arguments: z.string().describe('the arguments as JSON text') }),
});

export const openAiErrorBody = z
  .object({ error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string().nullable() }) })
  .meta({ id: 'OpenAiError' });

export const openAiModelListBody = z.object({
  object: z.literal('list'),
  data: z.array(z.object({ id: z.string().describe('owner/name'), object: z.literal('model'), created: z.number().int(), owned_by: z.string() })),
});

export const chatCompletionBody = z
  .object({
    id: z.string().describe('chatcmpl-<prediction id>'),
    object: z.literal('chat.completion'),
    created: z.number().int(),
    model: z.string(),
    choices: z.array(
      z.object({
        index: z.number().int(),
        message: z.object({
          role: z.literal('assistant'),
          content: z.string().nullable().describe('null when the answer is tool calls'),
          tool_calls: z.array(toolCallBody).optional(),
          refusal: z.null(),
        }),
        finish_reason: finishReason,
        logprobs: z.null(),
      }),
    ),
    usage,
  })
  .meta({ id: 'ChatCompletion' });

export const textCompletionBody = z
  .object({
    id: z.string().describe('cmpl-<prediction id>'),
    object: z.literal('text_completion'),
    created: z.number().int(),
    model: z.string(),
    choices: z.array(z.object({ index: z.number().int(), text: z.string(), finish_reason: finishReason, logprobs: z.null() })),
    usage,
  })
  .meta({ id: 'TextCompletion' });

export const embeddingListBody = z
  .object({
    object: z.literal('list'),
    data: z.array(
      z.object({
        object: z.literal('embedding'),
        index: z.number().int(),
        embedding: z.union([z.array(z.number()), z.string().describe('base64 of little-endian float32s')]),
      }),
    ),
    model: z.string(),
    usage: z.object({ prompt_tokens: z.number().int(), total_tokens: z.number().int() }),
  })
  .meta({ id: 'EmbeddingList' });
