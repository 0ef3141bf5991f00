/** OpenAI's sampling fields as the text-generation task's input, with OpenAI's defaults. */
import type { Sampling } from './protocol';

export function samplingInput(body: Sampling, maxTokens: number | null | undefined) {
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
