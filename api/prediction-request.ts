/**
 * What a request to create a prediction carries, shared by the prediction, deployment and OpenAI
 * routes: the body schemas and the headers (`Idempotency-Key`, `Cancel-After`, `Kiln-Priority`, `Prefer: wait`).
 */
import { z } from 'zod';
import { PRIORITY_KEYS } from '../domain/contracts';
import { webhookEvents } from '../domain/statuses';
import { parseDurationMs } from '../lib/duration';
import { BadRequestError, ValidationError } from './errors';

const inputSchema = z.record(z.string(), z.unknown());

const predictionOptions = {
  input: inputSchema,
  webhook: z
    .url({ protocol: /^https?$/ })
    .max(2048)
    .optional()
    .describe('Called with the prediction as it changes'),
  webhook_events_filter: z.array(z.enum(webhookEvents)).min(1).optional().describe('Which events call the webhook'),
  /** Accepted for compatibility with Replicate's clients; every prediction can be streamed. */
  stream: z.boolean().optional(),
  max_queue_seconds: z
    .number()
    .min(1)
    .max(24 * 3600)
    .optional()
    .describe(
      'Give up (status aborted, not charged) if it has not started this many seconds after its create; the Max-Queue-Time header says the same',
    ),
};

export const createBody = z.strictObject({
  version: z.string().min(1).describe('A version id, `owner/name` or `owner/name:version`'),
  ...predictionOptions,
});

export const modelCreateBody = z.strictObject(predictionOptions);

/**
 * A create's options from its body and headers: idempotency, priority, webhook, deadlines and
 * session affinity, as createPrediction takes them. `header` reads a request header.
 */
export function predictionCreateOptions(body: z.infer<typeof modelCreateBody>, header: (name: string) => string | undefined) {
  return {
    idempotencyKey: header('idempotency-key'),
    priority: parsePriority(header('kiln-priority')),
    webhook: body.webhook,
    webhookEventsFilter: body.webhook_events_filter,
    cancelAfterSeconds: parseCancelAfter(header('cancel-after')),
    maxQueueSeconds: maxQueueSeconds(body, header('max-queue-time')),
    session: parseSessionAffinity(header('x-session-affinity')),
  };
}

/** `Cancel-After`: seconds, or a duration like `90s`, `5m`, `1h30m` (at least 5 s, at most 24 h). */
export function parseCancelAfter(header: string | undefined): number | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  let seconds: number | undefined;
  if (/^\d+(\.\d+)?$/.test(value)) seconds = Number(value);
  else {
    const ms = parseDurationMs(value);
    if (ms !== undefined) seconds = ms / 1000;
  }
  if (seconds === undefined || seconds < 5 || seconds > 24 * 3600) {
    throw new ValidationError([{ field: 'Cancel-After', description: 'must be a duration between 5s and 24h, like 30, 90s or 5m' }]);
  }
  return seconds;
}

/**
 * The most a prediction may wait to start: the body's `max_queue_seconds`, else the
 * `Max-Queue-Time` header (seconds or a duration, 1 s to 24 h), which the OpenAI routes read too.
 */
export function maxQueueSeconds(body: { max_queue_seconds?: number } | undefined, header: string | undefined): number | undefined {
  if (body?.max_queue_seconds !== undefined) return body.max_queue_seconds;
  if (header === undefined) return undefined;
  const value = header.trim();
  const seconds = /^\d+(\.\d+)?$/.test(value) ? Number(value) : (parseDurationMs(value) ?? NaN) / 1000;
  if (!(seconds >= 1 && seconds <= 24 * 3600)) {
    throw new ValidationError([{ field: 'Max-Queue-Time', description: 'must be a duration between 1s and 24h, like 30, 30s or 2m' }]);
  }
  return seconds;
}

/** `Idempotency-Key`: 1 to 255 characters; a retried create with the same key returns the same prediction. */
export function parseIdempotencyKey(header: string | undefined): string | undefined {
  if (header !== undefined && (header.length === 0 || header.length > 255)) {
    throw new BadRequestError('Idempotency-Key must be 1 to 255 characters');
  }
  return header;
}

/** `Kiln-Priority`: interactive calls go ahead of the default, batch work after it. */
export function parsePriority(header: string | undefined): keyof typeof PRIORITY_KEYS | undefined {
  if (header === undefined) return undefined;
  const value = header.trim().toLowerCase();
  if (value in PRIORITY_KEYS) return value as keyof typeof PRIORITY_KEYS;
  throw new ValidationError([{ field: 'Kiln-Priority', description: 'must be interactive, default or batch' }]);
}

/**
 * `x-session-affinity` (Workers AI's header): requests of one session go to the node that holds its
 * evaluated tokens. Any visible ASCII, up to 256 characters.
 */
export function parseSessionAffinity(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (/^[\x21-\x7e]{1,256}$/.test(header)) return header;
  throw new ValidationError([{ field: 'x-session-affinity', description: 'must be 1 to 256 visible ASCII characters' }]);
}

/** `Prefer: wait` or `wait=N`: how long to hold the response for a result, in seconds (max 60). */
export function preferWaitSeconds(header: string | undefined): number {
  if (!header) return 0;
  const match = /(?:^|[,;\s])wait(?:=(\d+))?(?:$|[,;\s])/.exec(header);
  if (!match) return 0;
  return Math.min(match[1] === undefined ? 60 : Number(match[1]), 60);
}
