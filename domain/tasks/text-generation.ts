import { z } from 'zod';
import { jsonSchemaDocument } from './json-schema';

export const chatMessage = z.strictObject({
  role: z.enum(['system', 'user', 'assistant']),
  content: z.string().max(100_000),
});
export type ChatMessage = z.infer<typeof chatMessage>;

/**
 * Input of a language model, in the names Replicate's language models use. `messages` (a chat,
 * rendered with the model's chat template) is what the OpenAI-compatible endpoints send.
 */
export const textGenerationInput = z
  .strictObject({
    prompt: z.string().min(1).max(100_000).optional().describe('Text to continue'),
    messages: z.array(chatMessage).min(1).max(1000).optional().describe('A conversation to answer, instead of a prompt'),
    max_tokens: z.number().int().min(1).max(8192).default(128).describe('Maximum number of tokens to generate'),
    min_tokens: z.number().int().min(0).max(8192).default(0).describe('Minimum number of tokens to generate'),
    temperature: z.number().min(0).max(5).default(0.7).describe('Sampling temperature; 0 is greedy'),
    top_p: z.number().gt(0).max(1).default(0.95).describe('Nucleus sampling threshold'),
    top_k: z.number().int().min(0).default(0).describe('Sample among the k most likely tokens; 0 for all'),
    seed: z
      .number()
      .int()
      .min(0)
      .max(2 ** 32 - 1)
      .optional()
      .describe('Random seed for reproducible output'),
    stop: z
      .union([z.string().min(1), z.array(z.string().min(1)).max(16)])
      .optional()
      .describe('Stop generating when one of these strings appears'),
    lora: z
      .string()
      .min(1)
      .max(300)
      .optional()
      .describe(
        'A LoRA adapter of this model version to run: `owner/name` (or `name`, of your account), `owner/name:version`, or a version id',
      ),
    json_schema: jsonSchemaDocument
      .optional()
      .describe('Constrain the output to JSON that validates against this JSON Schema (a grammar enforces it token by token)'),
  })
  .refine((i) => i.min_tokens <= i.max_tokens, {
    message: 'min_tokens must not exceed max_tokens',
    path: ['min_tokens'],
  })
  // The grammar ends the JSON when it is complete: more tokens could only start another value.
  .refine((i) => i.json_schema === undefined || i.min_tokens === 0, {
    message: 'min_tokens cannot be used with json_schema (the output ends where the JSON does)',
    path: ['min_tokens'],
  })
  .refine((i) => (i.prompt === undefined) !== (i.messages === undefined), {
    message: 'give either prompt or messages',
    path: ['prompt'],
  });

/** Like Replicate's language models: the generated text as a list of chunks. */
export const textGenerationOutput = z.array(z.string());

export type TextGenerationInput = z.output<typeof textGenerationInput>;
