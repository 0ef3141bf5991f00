/**
 * A prediction's `metrics`: figures (times in seconds, token counts), and a few words where a
 * figure would not say it (`cache_tier`: where the cached prompt tokens came from).
 */
export type PredictionMetrics = Record<string, number | string>;

/** One of the figures, or undefined where it is absent or a word. */
export function figure(metrics: PredictionMetrics, key: string): number | undefined {
  const value = metrics[key];
  return typeof value === 'number' ? value : undefined;
}
