/**
 * Durations written as numbers with units, like `250ms`, `90s`, `5m` or `1h30m`: one parser for the
 * API's `Cancel-After` header, the webhook retry schedule and its config check; and the namespace
 * retention (whole days or hours), for its config check and setup.
 */

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** One or more `<number><unit>` terms with nothing between them; fractions allowed (`1.5m`). */
const DURATION = /^(\d+(\.\d+)?(ms|s|m|h))+$/;

/** A comma-separated list of whole-number single-unit durations, like `5s,5m,30m,2h`. */
export const DURATION_LIST = /^\s*\d+(ms|s|m|h)(\s*,\s*\d+(ms|s|m|h))*\s*$/;

/** The duration in milliseconds (surrounding spaces ignored), or undefined when `text` is not one. */
export function parseDurationMs(text: string): number | undefined {
  const value = text.trim();
  if (!DURATION.test(value)) return undefined;
  let ms = 0;
  for (const [, n, , u] of value.matchAll(/(\d+(\.\d+)?)(ms|s|m|h)/g)) ms += Number(n) * UNIT_MS[u as keyof typeof UNIT_MS];
  return ms;
}

/** Each entry of a list that matches DURATION_LIST, in milliseconds. */
export function parseDurationList(spec: string): number[] {
  return spec.split(',').map((part) => {
    const ms = parseDurationMs(part);
    if (ms === undefined) throw new Error(`not a duration: ${JSON.stringify(part)}`);
    return ms;
  });
}

/** A retention like `7d` or `36h` (whole days or hours: KILN_TEMPORAL_RETENTION) in milliseconds. */
export function retentionMs(text: string): number {
  return Number(text.slice(0, -1)) * (text.endsWith('d') ? 24 : 1) * UNIT_MS.h;
}
