/**
 * A LoRA adapter is a model version of its own whose settings name its base version
 * (`settings.loraBase`): it has its own queue, placement and usage, and an engine runs it on the
 * base's weights, loaded once (engines/llama/engine.ts loadAdapter).
 */
export const loraBaseOf = (settings: Record<string, unknown> | null | undefined): string | undefined =>
  typeof settings?.loraBase === 'string' ? settings.loraBase : undefined;

export const loraScaleOf = (settings: Record<string, unknown> | null | undefined): number | undefined =>
  typeof settings?.loraScale === 'number' ? settings.loraScale : undefined;
