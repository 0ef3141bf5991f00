import { z } from 'zod';

/** Text to vectors: one text or a batch. */
export const embeddingsInput = z.strictObject({
  text: z
    .union([z.string().min(1).max(100_000), z.array(z.string().min(1).max(100_000)).min(1).max(2048)])
    .describe('A text, or a list of texts, to embed'),
});

/** One vector per text, in input order. */
export const embeddingsOutput = z.array(z.array(z.number()));

export type EmbeddingsInput = z.output<typeof embeddingsInput>;
