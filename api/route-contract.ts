/**
 * What a route declares about itself, next to its handler: method, path, the zod schemas of its
 * request and of each response. `/openapi.json` is generated from these declarations
 * (api/openapi.ts) and the route-coverage test fails on any Express route that has none.
 */
import type { ResponseConfig, RouteConfig } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import { errorBody } from './response-schemas';

/** One operation: `path` is the public path in OpenAPI form (`/v1/predictions/{id}`), mount prefix included. */
export type RouteContract = RouteConfig;

/** A JSON body of this schema. */
export const jsonContent = (schema: z.ZodType) => ({ content: { 'application/json': { schema } } });

export const jsonResponse = (description: string, schema: z.ZodType): ResponseConfig => ({ description, ...jsonContent(schema) });

/** The errors every authenticated route may answer, in Replicate's `{detail, status}` shape. */
export const errorResponses: Record<string, ResponseConfig> = {
  '401': jsonResponse('No valid token', errorBody),
  '404': jsonResponse('Not found (or not yours)', errorBody),
  '422': jsonResponse('A field is wrong; invalid_fields names it', errorBody),
  '429': jsonResponse('Rate limit or cap; see Retry-After', errorBody),
};

/** Path parameters, each a string. */
export const pathParams = <K extends string>(...names: K[]) =>
  z.object(Object.fromEntries(names.map((n) => [n, z.string()])) as Record<K, z.ZodString>);

/** A page in Replicate's shape: `{next, previous, results}` with URLs (or null) for the neighbours. */
export const pageOf = (item: z.ZodType) =>
  z.object({ next: z.string().nullable(), previous: z.string().nullable(), results: z.array(item) });

/** The headers a prediction create reads (the Replicate routes and deployments alike). */
export const predictionCreateHeaders = z.object({
  prefer: z.string().optional().describe('wait[=N]: hold the response up to N s (60 max)'),
  'cancel-after': z.string().optional().describe('Cancel if not done by then, e.g. 90s or 5m (aborted if never started)'),
  'max-queue-time': z.string().optional().describe('Abort if not started by then, e.g. 30s (as max_queue_seconds in the body)'),
  'idempotency-key': z.string().optional().describe('A retried create returns the same prediction'),
  'kiln-priority': z.enum(['interactive', 'default', 'batch']).optional(),
  'x-session-affinity': z
    .string()
    .max(256)
    .optional()
    .describe("A session's id: its requests go to the node that keeps its evaluated tokens (prefix caching)"),
});

/** A capability URL's query (file content, streams): the signature is the permission until it expires. */
export const signedUrlQuery = z.object({
  expires: z.coerce.number().int().optional().describe('Unix seconds the link expires at'),
  sig: z.string().optional().describe('The signature over what the link grants and until when'),
});
