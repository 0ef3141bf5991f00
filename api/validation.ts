import type { z } from 'zod';
import { ValidationError } from './errors';

/** Parses with zod or throws a 422 naming each bad field (prefixed, e.g. `input.prompt`). */
export function parseOr422<S extends z.ZodType>(schema: S, value: unknown, prefix?: string): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw ValidationError.fromZod(result.error, prefix);
  return result.data;
}
