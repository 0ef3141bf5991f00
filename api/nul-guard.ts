/**
 * Postgres text and jsonb cannot hold U+0000. A model's input may (it reaches the model as sent
 * and is stored with NUL replaced: db/sanitize.ts), but every other string of a JSON body is a
 * name, reference or description that Kiln stores or looks up as text, so NUL there is refused
 * with a 422 naming the field, rather than failing as a query.
 */
import type { RequestHandler } from 'express';
import { ValidationError } from './errors';

/** Top-level fields that carry a model's input: Replicate's `input`/`inputs`, OpenAI's `messages`/`prompt`/`input`. */
const MODEL_INPUT = new Set(['input', 'inputs', 'messages', 'prompt']);

/** The path of the first string or key holding NUL, outside model input; undefined if none. */
export function nulField(body: unknown): string | undefined {
  if (!body || typeof body !== 'object') return undefined;
  // Iterative: a body may nest thousands deep.
  const stack: Array<[unknown, string]> = Object.entries(body)
    .filter(([k]) => !MODEL_INPUT.has(k))
    .map(([k, v]) => [v, k]);
  for (const [k] of Object.entries(body)) if (k.includes('\u0000')) return JSON.stringify(k);
  while (stack.length > 0) {
    const [value, path] = stack.pop()!;
    if (typeof value === 'string') {
      if (value.includes('\u0000')) return path;
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => stack.push([v, `${path}[${i}]`]));
    } else if (value && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) {
        if (k.includes('\u0000')) return path;
        stack.push([v, `${path}.${k}`]);
      }
    }
  }
  return undefined;
}

export const rejectNulOutsideInput: RequestHandler = (req, _res, next) => {
  const field = nulField(req.body);
  next(field === undefined ? undefined : new ValidationError([{ field, description: 'must not contain the NUL character (U+0000)' }]));
};
