/**
 * Postgres text and jsonb cannot hold U+0000, and a model can emit it (a byte token 0x00).
 * Projections must never fail on what a model produced, so NUL becomes U+FFFD everywhere.
 */
export function withoutNul<T>(value: T): T {
  if (typeof value === 'string') return (value.includes('\u0000') ? value.replace(/\u0000/g, '\uFFFD') : value) as T;
  if (Array.isArray(value)) return value.map(withoutNul) as T;
  if (value && typeof value === 'object' && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [withoutNul(k), withoutNul(v)])) as T;
  }
  return value;
}
