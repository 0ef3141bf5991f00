/**
 * The Responses API's wire shapes (OpenAI's `/v1/responses`), as zod schemas: the create body, with
 * a 400 naming each parameter Kiln cannot honour, and the response object, items and list bodies.
 */
import { z } from 'zod';
import { jsonSchemaDocument } from '../../domain/tasks/json-schema';

const functionName = z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, underscores or dashes');

/** Text, or parts of it: input_text from the caller, output_text from an earlier answer. Images and files are refused by name. */
const contentText = z.union([
  z.string(),
  z
    .array(
      z.discriminatedUnion('type', [
        z.object({ type: z.literal('input_text'), text: z.string() }),
        z.object({ type: z.literal('output_text'), text: z.string(), annotations: z.array(z.unknown()).optional() }).loose(),
        z.object({ type: z.literal('refusal'), refusal: z.string() }),
      ]),
      { message: 'Kiln reads input_text, output_text and refusal parts only (its models take no images, files or audio)' },
    )
    .transform((parts) => parts.map((p) => (p.type === 'refusal' ? p.refusal : p.text)).join('')),
]);

const itemId = z.string().min(1).max(128).optional();
const itemStatus = z.enum(['in_progress', 'completed', 'incomplete']).optional();

export const messageItem = z.object({
  type: z.literal('message'),
  id: itemId,
  status: itemStatus,
  role: z.enum(['user', 'system', 'developer', 'assistant']),
  content: contentText,
});
export const functionCallItem = z.object({
  type: z.literal('function_call'),
  id: itemId,
  status: itemStatus,
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
});
export const functionCallOutputItem = z.object({
  type: z.literal('function_call_output'),
  id: itemId,
  status: itemStatus,
  call_id: z.string().min(1),
  output: contentText,
});

/** An item of a stored response (its input or its output) named by its id, in place of the item itself. */
export const itemReference = z.object({ type: z.literal('item_reference'), id: z.string().min(1).max(128) });

/** An input item; a message may leave out its `type`, as OpenAI's easy input messages do. */
const inputItem = z.preprocess(
  (item) => (item && typeof item === 'object' && !('type' in item) && 'role' in item ? { ...item, type: 'message' } : item),
  z.discriminatedUnion('type', [messageItem, functionCallItem, functionCallOutputItem, itemReference], {
    message: 'Kiln takes message, function_call, function_call_output and item_reference items (no reasoning or built-in tool items)',
  }),
);

export type InputItem = z.output<typeof inputItem>;
/** An input item with its references resolved: what a conversation is made of. */
export type ResolvedInputItem = Exclude<InputItem, { type: 'item_reference' }>;

const inputItems = z.array(inputItem).min(1).max(4096);

/** A string or items; parsed as whichever it is, so a bad item is named by its path (`input.0.content`), not just `input`. */
const responseInputField = z
  .unknown()
  .transform((value, ctx): string | InputItem[] => {
    const parsed = (typeof value === 'string' ? z.string().min(1) : inputItems).safeParse(value);
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) ctx.addIssue({ ...issue } as never);
    return z.NEVER;
  })
  .describe('a string (one user message), or message, function_call, function_call_output and item_reference items');

export const functionTool = z.object({
  type: z.literal('function', { message: 'Kiln runs function tools only' }),
  name: functionName,
  description: z.string().max(10_000).nullish(),
  parameters: jsonSchemaDocument.nullish(),
  strict: z.boolean().nullish(),
});
export type FunctionTool = z.infer<typeof functionTool>;

export const responsesToolChoice = z.union([
  z.enum(['none', 'auto', 'required']),
  z.object({ type: z.literal('function'), name: functionName }),
]);

export const textFormat = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }),
  z.object({ type: z.literal('json_object') }),
  z.object({
    type: z.literal('json_schema'),
    name: functionName,
    description: z.string().nullish(),
    schema: jsonSchemaDocument,
    strict: z.boolean().nullish(),
  }),
]);

/** A parameter Kiln cannot honour: null or left out, else a 400 saying why. */
const unsupported = (why: string) => z.null({ message: why }).optional();

/** Every field OpenAI documents for a create; a field that would change the answer and that Kiln cannot honour is a 400 naming it. */
export const createResponseBody = z
  .strictObject({
    model: z.string().min(1),
    input: responseInputField,
    instructions: z.string().nullish(),
    previous_response_id: z.string().min(1).nullish(),
    store: z.boolean().nullish(),
    background: z.boolean().nullish(),
    stream: z.boolean().nullish(),
    stream_options: z.object({ include_obfuscation: z.boolean().optional() }).nullish(),
    tools: z.array(functionTool).max(128).nullish(),
    tool_choice: responsesToolChoice.nullish(),
    parallel_tool_calls: z.boolean().nullish(),
    text: z
      .strictObject({
        format: textFormat.nullish(),
        verbosity: z.enum(['medium'], { message: 'Kiln answers at one verbosity: medium' }).nullish(),
      })
      .nullish(),
    max_output_tokens: z.number().int().min(1).max(8192).nullish(),
    temperature: z.number().min(0).max(2).nullish(),
    top_p: z.number().gt(0).max(1).nullish(),
    // vLLM's extension, as on chat completions: the end of text is held off until this many tokens are out.
    min_tokens: z.number().int().min(0).max(8192).nullish(),
    metadata: z
      .record(z.string().max(64), z.string().max(512))
      .refine((m) => Object.keys(m).length <= 16, 'holds at most 16 keys')
      .nullish(),
    user: z.string().max(256).nullish(),
    // Hints and routing: accepted and echoed, as OpenAI does.
    service_tier: z.enum(['auto', 'default', 'flex', 'scale', 'priority']).nullish(),
    prompt_cache_key: z.string().max(256).nullish(),
    prompt_cache_retention: z.enum(['in-memory', '24h']).nullish(),
    safety_identifier: z.string().max(256).nullish(),
    truncation: z.enum(['disabled'], { message: 'Kiln never drops input to fit the context: only disabled' }).nullish(),
    // Fields about items Kiln never makes (reasoning, built-in tools) change nothing; logprobs it does not return.
    include: z.array(z.string().refine((v) => v !== 'message.output_text.logprobs', 'Kiln returns no logprobs')).nullish(),
    reasoning: z
      .object({
        effort: unsupported('Kiln models do not reason: effort must be null'),
        summary: unsupported('Kiln models do not reason: summary must be null'),
        generate_summary: unsupported('Kiln models do not reason'),
      })
      .nullish(),
    top_logprobs: z.literal(0, { message: 'Kiln returns no logprobs' }).nullish(),
    max_tool_calls: unsupported('Kiln does not cap tool calls'),
    conversation: unsupported('Kiln has no conversations objects: chain with previous_response_id'),
    prompt: unsupported('Kiln has no stored prompts'),
  })
  .superRefine((b, ctx) => {
    const names = (b.tools ?? []).map((t) => t.name);
    const choice = b.tool_choice;
    if (choice && choice !== 'none' && names.length === 0)
      ctx.addIssue({ code: 'custom', path: ['tool_choice'], message: 'needs tools to choose from' });
    if (typeof choice === 'object' && choice && names.length > 0 && !names.includes(choice.name))
      ctx.addIssue({ code: 'custom', path: ['tool_choice', 'name'], message: `is not one of the tools (${names.join(', ')})` });
    if (b.background && b.store === false)
      ctx.addIssue({ code: 'custom', path: ['store'], message: 'a background response must be stored' });
    if (b.text?.format?.type === 'json_schema' && (b.tools?.length ?? 0) > 0 && b.tool_choice !== 'none')
      ctx.addIssue({ code: 'custom', path: ['text', 'format'], message: 'Kiln cannot combine a JSON schema with tools in one answer' });
  });

export type CreateResponseRequest = z.output<typeof createResponseBody>;

const outputText = z.object({
  type: z.literal('output_text'),
  text: z.string(),
  annotations: z.array(z.unknown()).describe('always empty'),
  logprobs: z.array(z.unknown()).describe('always empty'),
});
export const outputMessage = z.object({
  type: z.literal('message'),
  id: z.string().describe('msg_<prediction id>'),
  status: z.enum(['in_progress', 'completed', 'incomplete']),
  role: z.literal('assistant'),
  content: z.array(outputText),
});
export const outputFunctionCall = z.object({
  type: z.literal('function_call'),
  id: z.string().describe('fc_<prediction id>_<n>'),
  status: z.enum(['in_progress', 'completed', 'incomplete']),
  call_id: z.string().describe('what the function_call_output item that answers it names'),
  name: z.string(),
  arguments: z.string().describe('the arguments as JSON text'),
});
export const outputItem = z.discriminatedUnion('type', [outputMessage, outputFunctionCall]);
export type OutputMessage = z.infer<typeof outputMessage>;
export type OutputFunctionCall = z.infer<typeof outputFunctionCall>;
export type OutputItem = z.infer<typeof outputItem>;

export const responseStatuses = ['queued', 'in_progress', 'completed', 'failed', 'cancelled', 'incomplete'] as const;
export type ResponseStatus = (typeof responseStatuses)[number];

export const responseUsage = z.object({
  input_tokens: z.number().int(),
  input_tokens_details: z.object({
    cached_tokens: z.number().int().describe('input tokens already in the node’s KV cache (the chain’s prefix)'),
  }),
  output_tokens: z.number().int(),
  output_tokens_details: z.object({ reasoning_tokens: z.number().int() }),
  total_tokens: z.number().int(),
});
export type ResponseUsage = z.infer<typeof responseUsage>;

export const responseBody = z
  .object({
    id: z.string().describe('resp_<prediction id>'),
    object: z.literal('response'),
    created_at: z.number().int(),
    completed_at: z.number().int().nullable(),
    status: z.enum(responseStatuses),
    background: z.boolean(),
    error: z.object({ code: z.string(), message: z.string() }).nullable(),
    incomplete_details: z.object({ reason: z.literal('max_output_tokens') }).nullable(),
    instructions: z.string().nullable(),
    max_output_tokens: z.number().int().nullable(),
    model: z.string(),
    output: z.array(outputItem),
    parallel_tool_calls: z.boolean(),
    previous_response_id: z.string().nullable(),
    reasoning: z.object({ effort: z.null(), summary: z.null() }),
    service_tier: z.string(),
    store: z.boolean(),
    temperature: z.number(),
    top_p: z.number(),
    text: z.object({ format: z.unknown(), verbosity: z.literal('medium') }),
    tool_choice: z.unknown(),
    tools: z.array(z.unknown()),
    truncation: z.literal('disabled'),
    usage: responseUsage.nullable(),
    metadata: z.record(z.string(), z.string()),
    user: z.string().nullable(),
    prompt_cache_key: z.string().nullable(),
    safety_identifier: z.string().nullable(),
  })
  .meta({ id: 'Response' });

export type ResponseObject = z.infer<typeof responseBody>;

export const storedInputItem = z.discriminatedUnion('type', [
  messageItem.extend({ id: z.string(), content: z.array(z.object({ type: z.enum(['input_text', 'output_text']), text: z.string() })) }),
  functionCallItem.extend({ id: z.string() }),
  functionCallOutputItem.extend({ id: z.string(), output: z.string() }),
]);
export type StoredInputItem = z.infer<typeof storedInputItem>;

export const inputItemListBody = z
  .object({
    object: z.literal('list'),
    data: z.array(storedInputItem),
    first_id: z.string().nullable(),
    last_id: z.string().nullable(),
    has_more: z.boolean(),
  })
  .meta({ id: 'ResponseInputItemList' });

export const deletedResponseBody = z
  .object({ id: z.string(), object: z.literal('response'), deleted: z.literal(true) })
  .meta({ id: 'DeletedResponse' });
