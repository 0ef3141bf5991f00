/**
 * OpenAI's wire shapes on /openai/v1, as zod schemas: the request bodies the routes parse, the
 * response bodies the contracts name, and the `openai` client tests check each response against.
 */
import { z } from 'zod';
import { jsonSchemaDocument } from '../../domain/tasks/json-schema';

const functionName = z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, underscores or dashes');

export const responseFormat = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }),
  z.object({ type: z.literal('json_object') }),
  z.object({
    type: z.literal('json_schema'),
    json_schema: z.object({
      name: functionName,
      description: z.string().optional(),
      schema: jsonSchemaDocument.optional(),
      strict: z.boolean().nullish(),
    }),
  }),
]);

export const tool = z.object({
  type: z.literal('function'),
  function: z.object({
    name: functionName,
    description: z.string().max(10_000).optional(),
    parameters: jsonSchemaDocument.optional(),
    strict: z.boolean().nullish(),
  }),
});

export const toolChoice = z.union([
  z.enum(['none', 'auto', 'required']),
  z.object({ type: z.literal('function'), function: z.object({ name: functionName }) }),
]);

export const toolCall = z.object({
  id: z.string().min(1),
  type: z.literal('function'),
  function: z.object({ name: z.string().min(1), arguments: z.string() }),
});

export type Tool = z.infer<typeof tool>;
export type ToolChoice = z.infer<typeof toolChoice>;
export type ToolCall = z.infer<typeof toolCall>;
export type ResponseFormat = z.infer<typeof responseFormat>;

/** Messages as OpenAI sends them, text parts already joined. */
export type OpenAiMessage =
  | { role: 'system' | 'developer' | 'user'; content: string }
  | { role: 'assistant'; content?: string | null; tool_calls?: ToolCall[] }
  | { role: 'tool'; content: string; tool_call_id: string };

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

/** The fields chat and text completions share. */
export type Sampling = z.infer<z.ZodObject<typeof sampling>>;

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
  prompt: z.union([
    z.string().min(1),
    z
      .array(z.string().min(1))
      .length(1)
      .transform((p) => p[0]),
  ]),
});

export const embeddingsBody = z.object({
  model: z.string().min(1),
  input: z.union([z.string().min(1), z.array(z.string().min(1)).min(1).max(2048)]),
  encoding_format: z.enum(['float', 'base64']).optional(),
  dimensions: z.number().int().optional(),
});

export type ChatRequest = z.output<typeof chatBody>;
export type CompletionRequest = z.output<typeof completionBody>;
export type EmbeddingsRequest = z.output<typeof embeddingsBody>;

const usage = z.object({
  prompt_tokens: z.number().int(),
  completion_tokens: z.number().int(),
  total_tokens: z.number().int(),
  prompt_tokens_details: z.object({
    cached_tokens: z.number().int().describe('Prompt tokens already evaluated on the node (prefix caching)'),
  }),
});
const finishReason = z.enum(['stop', 'length', 'tool_calls']).nullable();
const toolCallBody = z.object({
  id: z.string(),
  type: z.literal('function'),
  function: z.object({ name: z.string(), arguments: z.string().describe('the arguments as JSON text') }),
});

export type Usage = z.infer<typeof usage>;
export type FinishReason = NonNullable<z.infer<typeof finishReason>>;

export const openAiErrorBody = z
  .object({ error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string().nullable() }) })
  .meta({ id: 'OpenAiError' });

export type OpenAiErrorBody = z.infer<typeof openAiErrorBody>;

export const openAiModelListBody = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({ id: z.string().describe('owner/name'), object: z.literal('model'), created: z.number().int(), owned_by: z.string() }),
  ),
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

export type ChatCompletion = z.infer<typeof chatCompletionBody>;
export type TextCompletion = z.infer<typeof textCompletionBody>;
export type EmbeddingList = z.infer<typeof embeddingListBody>;
export type ModelList = z.infer<typeof openAiModelListBody>;
