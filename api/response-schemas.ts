/**
 * The JSON bodies the API answers with, as zod schemas. Routes name them in their contracts
 * (api/route-contract.ts), `/openapi.json` publishes them, and the client tests check every
 * response they see against them (test/spec-checked-fetch.ts). A schema names each field the
 * body has: a field the code adds without a line here fails those tests.
 */
import { z } from 'zod';
import { batchStatuses, predictionStatuses, webhookEvents } from '../domain/statuses';

const timestamp = z.iso.datetime({ offset: true });
const nullableTimestamp = timestamp.nullable();

export const queueBody = z
  .object({
    position: z
      .number()
      .int()
      .describe("1: the next to start. Every account's predictions ahead of it on the version, in the fair queue's order"),
    ahead: z.number().int().describe("This account's own predictions ahead of it"),
    eta_seconds: z
      .number()
      .nullable()
      .describe('Seconds until it should start, from recent service times and the slots serving the version; null until both are known'),
    since: timestamp.describe('When it began to wait'),
  })
  .meta({ id: 'QueuePosition' });

export const errorBody = z
  .object({
    title: z.string(),
    detail: z.string(),
    status: z.number().int(),
    invalid_fields: z.array(z.object({ type: z.string(), field: z.string(), description: z.string() })).optional(),
    queue: queueBody.optional().describe('A create refused for max_queue_seconds: where it would have stood'),
  })
  .meta({ id: 'Error', description: "Replicate's error shape; invalid_fields names each wrong field" });

export const predictionBody = z
  .object({
    id: z.string(),
    model: z.string().describe('owner/name'),
    version: z.string(),
    input: z.record(z.string(), z.unknown()),
    output: z.unknown().describe("The task's output; file outputs are signed URLs that expire"),
    logs: z.string(),
    error: z.string().nullable(),
    status: z.enum(predictionStatuses),
    source: z.enum(['api', 'web']),
    data_removed: z.boolean(),
    created_at: timestamp,
    started_at: nullableTimestamp,
    completed_at: nullableTimestamp,
    metrics: z
      .record(z.string(), z.union([z.number(), z.string()]))
      .describe(
        'Figures (times in seconds, token counts), and `cache_tier`: live, disk, object or none, where the cached prompt tokens came from',
      ),
    webhook: z.string().optional(),
    webhook_events_filter: z.array(z.enum(webhookEvents)).optional(),
    workflow_id: z.string().describe('The Temporal workflow that runs it: temporal workflow describe -w <workflow_id>'),
    run_id: z
      .string()
      .optional()
      .describe(
        "The workflow's run this state is from (absent until its first write, and in webhooks); a retry or an operator's reset starts a new run, and earlier runs stay in the history",
      ),
    retries: z
      .number()
      .int()
      .optional()
      .describe('How many times POST /v1/predictions/{id}/retry ran it again (0: the first run is current; absent in webhooks)'),
    queue: queueBody.optional().describe('While it waits to start (status starting), on GET /v1/predictions/{id}: where it stands'),
    urls: z.object({
      get: z.string(),
      cancel: z.string(),
      stream: z
        .string()
        .describe(
          'SSE: output, logs, error, done; reset (the output so far came from a failed attempt: drop it). Signed; expires an hour after the read that returned it',
        ),
      temporal_ui: z
        .string()
        .optional()
        .describe("The workflow in the operators' Temporal UI; only where the server sets KILN_TEMPORAL_UI_URL, never in webhooks"),
    }),
  })
  .meta({ id: 'Prediction' });

export const setupProgressBody = z
  .object({
    phase: z.enum(['queued', 'download', 'load']).nullable().describe('null once the prediction has started'),
    status: z.enum(predictionStatuses),
    file: z.string().optional(),
    bytes: z.number().optional(),
    total: z.number().optional(),
    attempt: z.number().optional(),
  })
  .meta({ id: 'SetupProgress' });

const signedGet = z.object({ get: z.string().describe('Signed; usable without a token until it expires') });

export const fileBody = z
  .object({
    id: z.string(),
    name: z.string(),
    content_type: z.string(),
    size: z.number().int(),
    etag: z.string(),
    checksums: z.object({ sha256: z.string() }),
    metadata: z.record(z.string(), z.unknown()),
    created_at: timestamp,
    expires_at: nullableTimestamp,
    urls: signedGet,
  })
  .meta({ id: 'File' });

export const batchBody = z
  .object({
    id: z.string(),
    status: z.enum(batchStatuses),
    model: z.string().describe('owner/name'),
    version: z.string(),
    total: z.number().int(),
    completed: z.number().int().describe('Inputs with an output line'),
    failed: z.number().int().describe('Inputs with an error line'),
    chunk_size: z.number().int(),
    source: z.string().describe('inline, file:<id> or the input URL'),
    error: z.string().nullable().describe('Which chunk failed, on which node, and why'),
    logs: z.string(),
    attempt: z.number().int().describe('1, then one more for each retry; the output lines a retry wrote carry its attempt'),
    run_id: z.string().nullable().describe("The workflow run that wrote this state (a retry's run once it has started)"),
    created_at: timestamp,
    started_at: nullableTimestamp,
    completed_at: nullableTimestamp,
    output_file: z
      .object({
        id: z.string(),
        size: z.number().int().nullable(),
        content_type: z.string(),
        urls: z.object({ get: z.string().nullable() }),
      })
      .nullable()
      .describe('JSONL, one line per input in input order: {index, output} or {index, error}, with attempt on the lines a retry wrote'),
    urls: z.object({ get: z.string(), cancel: z.string(), retry: z.string(), output: z.string().nullable() }),
  })
  .meta({ id: 'Batch' });

export const versionBody = z
  .object({
    id: z.string(),
    created_at: timestamp,
    cog_version: z.null(),
    task: z.string(),
    engine: z.string(),
    files: z.array(z.object({ path: z.string(), sha256: z.string(), size: z.number().int() })),
    memory_bytes: z.number().int(),
    settings: z.record(z.string(), z.unknown()),
    retry: z.object({ max_attempts: z.number().int(), initial_interval_s: z.number(), backoff: z.number() }),
    openapi_schema: z
      .object({ components: z.object({ schemas: z.record(z.string(), z.unknown()) }) })
      .describe("The task's Input and Output JSON schemas"),
  })
  .meta({ id: 'Version' });

export const modelBody = z
  .object({
    url: z.string(),
    owner: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    visibility: z.enum(['public', 'private']),
    task: z.string(),
    github_url: z.null(),
    paper_url: z.null(),
    license_url: z.string().nullable().describe('Where the license of the weights is.'),
    license: z.string().nullable().describe("The weights' license by name (an SPDX id where there is one): Kiln's addition."),
    cover_image_url: z.null(),
    default_example: z.null(),
    created_at: timestamp,
    latest_version: versionBody.nullable(),
  })
  .meta({ id: 'Model' });

export const blobUploadBody = z.object({ sha256: z.string(), size: z.number().int(), created: z.boolean() }).meta({ id: 'BlobUpload' });

export const hardwareBody = z
  .array(
    z.object({
      name: z.string(),
      sku: z.string(),
      nodes: z.number().int(),
      roles: z
        .array(z.object({ node: z.string(), role: z.enum(['prefill', 'decode', 'both']) }))
        .describe(
          'Each node of this kind and its role (KILN_ENGINE_ROLE): long prompts are prefilled on `prefill` nodes and decoded on `decode` nodes',
        ),
    }),
  )
  .meta({ id: 'Hardware' });

export const deploymentBody = z
  .object({
    owner: z.string(),
    name: z.string(),
    current_release: z.object({
      number: z.number().int(),
      model: z.string().nullable(),
      version: z.string(),
      created_at: timestamp,
      configuration: z.object({ hardware: z.string(), min_instances: z.number().int(), max_instances: z.number().int() }),
    }),
  })
  .meta({ id: 'Deployment' });

export const accountBody = z
  .object({
    type: z.string(),
    username: z.string(),
    name: z.string().nullable(),
    created_at: timestamp,
    limits: z.object({
      max_running: z.number().int(),
      max_queued: z.number().int(),
      over_cap: z.string(),
      fairness_weight: z.number(),
      max_pinned_replicas: z.number().int(),
      max_queue_seconds: z.number().nullable().describe('Default max_queue_seconds of its predictions (null: none)'),
      max_open_streams: z.number().int().describe('SSE streams the account may hold open at once on one API process'),
      max_waiting_requests: z
        .number()
        .int()
        .describe("Requests held for their prediction's end (Prefer: wait, OpenAI without stream) at once on one API process"),
      rate_limits_per_minute: z.record(z.string(), z.number()),
    }),
    current: z.object({ admitted: z.number().int(), queued: z.number().int() }),
  })
  .meta({ id: 'Account' });

export const newTokenBody = z
  .object({ id: z.string(), name: z.string(), token: z.string().describe('Shown here once, never again'), prefix: z.string() })
  .meta({ id: 'NewToken' });

export const tokenListBody = z.object({
  results: z.array(
    z.object({
      id: z.string(),
      name: z.string(),
      prefix: z.string(),
      created_at: timestamp,
      last_used_at: nullableTimestamp,
      revoked_at: nullableTimestamp,
    }),
  ),
});

export const revokedTokenBody = z.object({ id: z.string(), revoked_at: nullableTimestamp });

export const usageBody = z.object({
  start: z.iso.date(),
  end: z.iso.date(),
  results: z.array(
    z.object({
      day: z.string(),
      model: z.string(),
      hardware: z.string(),
      predictions: z.number().int(),
      predict_time: z.number(),
      input_tokens: z.number().int(),
      cached_tokens: z.number().int().describe('Of input_tokens, those already evaluated on the node (prefix caching)'),
      output_tokens: z.number().int(),
      images: z.number().int(),
    }),
  ),
});

export const webhookSecretBody = z.object({ key: z.string().describe('whsec_…: verify webhook signatures with it') });
export const rotatedSecretBody = z.object({
  key: z.string(),
  previous_key_expires_at: timestamp.describe('Until then the previous key signs too'),
});

export const webhookDeliveriesBody = z.object({
  webhook: z.string().nullable(),
  results: z.array(
    z.object({
      webhook_id: z.string(),
      event: z.string(),
      url: z.string(),
      attempt: z.number().int(),
      status_code: z.number().int().nullable(),
      latency_ms: z.number().nullable(),
      error: z.string().nullable(),
      created_at: timestamp,
    }),
  ),
});

export const redeliveryBody = z.object({
  webhook_id: z.string(),
  delivery: z.string().describe("The redelivery's workflow: one per prediction at a time"),
  started: z.boolean().describe('false: a redelivery of this prediction was already in flight, and this call joined it'),
});
