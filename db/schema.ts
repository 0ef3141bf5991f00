import { sql } from 'drizzle-orm';
import {
  bigint,
  bigserial,
  boolean,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  real,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';
import type { NodeLoad } from '../domain/prefill-split';
import {
  batchStatuses,
  engines,
  type LoadedVersion,
  predictionStatuses,
  streamEvents,
  type VersionFile,
  type VersionRetryPolicy,
  type WebhookEvent,
  webhookEvents,
} from '../domain/statuses';

const createdAt = () => timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow();

/** A column that names an account; its rows go when the account goes. */
const accountColumn = (name: string) =>
  text(name)
    .notNull()
    .references(() => accounts.id, { onDelete: 'cascade' });

export const accounts = pgTable('accounts', {
  id: text('id').primaryKey(),
  /** The owner name in `owner/model` and in `GET /v1/account`. */
  username: text('username').notNull().unique(),
  name: text('name'),
  type: text('type', { enum: ['user', 'organization'] })
    .notNull()
    .default('user'),
  disabled: boolean('disabled').notNull().default(false),
  /** Share of the engines under contention, relative to other accounts (Temporal fairnessWeight). */
  fairnessWeight: real('fairness_weight').notNull().default(1),
  /** Accounts in one group share one fairness key (an organization's members, say). */
  fairnessGroup: text('fairness_group'),
  /** Predictions admitted at once (queued at the engines or running); more wait or are refused. */
  maxRunning: integer('max_running').notNull().default(64),
  /** Predictions waiting for admission; more are refused with 429. */
  maxQueued: integer('max_queued').notNull().default(1000),
  overCap: text('over_cap', { enum: ['wait', 'refuse'] })
    .notNull()
    .default('wait'),
  /** Requests per minute by task type, over the defaults. */
  rateLimits: jsonb('rate_limits').$type<Record<string, number>>().notNull().default({}),
  /** Replicas the account's deployments may keep loaded at all times (the sum of their min_instances). */
  maxPinnedReplicas: integer('max_pinned_replicas').notNull().default(2),
  /** The account's default max_queue_seconds: a prediction not started by then is aborted. Null: no limit. */
  maxQueueSeconds: real('max_queue_seconds'),
  /** SSE streams open at once on one API process (Replicate's and OpenAI's); null: KILN_MAX_OPEN_STREAMS. */
  maxOpenStreams: integer('max_open_streams'),
  /** Requests held for their prediction's end at once on one API process (`Prefer: wait`, OpenAI without `stream`); null: KILN_MAX_WAITING_REQUESTS. */
  maxWaitingRequests: integer('max_waiting_requests'),
  createdAt: createdAt(),
});

export const apiTokens = pgTable(
  'api_tokens',
  {
    id: text('id').primaryKey(),
    accountId: accountColumn('account_id'),
    name: text('name').notNull(),
    /** sha256 of the token: the token itself is shown once and never stored. */
    tokenHash: text('token_hash').notNull().unique(),
    /** The first characters, so a person can tell tokens apart in a list. */
    prefix: text('prefix').notNull(),
    createdAt: createdAt(),
    lastUsedAt: timestamp('last_used_at', { withTimezone: true }),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
  },
  (t) => [index('api_tokens_account_idx').on(t.accountId)],
);

export const models = pgTable(
  'models',
  {
    id: text('id').primaryKey(),
    ownerId: accountColumn('owner_id'),
    owner: text('owner').notNull(),
    name: text('name').notNull(),
    description: text('description'),
    /** The weights' license, as an SPDX id or the license's own name (e.g. `Apache-2.0`); null where the owner gave none. */
    license: text('license'),
    /** Where the license's text is (Replicate's `license_url`). */
    licenseUrl: text('license_url'),
    visibility: text('visibility', { enum: ['public', 'private'] })
      .notNull()
      .default('private'),
    /** Account ids that may use a private model besides its owner. */
    allowedAccounts: text('allowed_accounts').array().notNull().default([]),
    task: text('task').notNull(),
    latestVersionId: text('latest_version_id'),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex('models_owner_name_idx').on(t.owner, t.name)],
);

export const modelVersions = pgTable(
  'model_versions',
  {
    /** sha256 of the manifest: the same weights and settings give the same version. */
    id: text('id').primaryKey(),
    modelId: text('model_id')
      .notNull()
      .references(() => models.id, { onDelete: 'cascade' }),
    task: text('task').notNull(),
    engine: text('engine', { enum: engines }).notNull(),
    files: jsonb('files').$type<VersionFile[]>().notNull(),
    memoryBytes: bigint('memory_bytes', { mode: 'number' }).notNull(),
    /** Engine settings such as context size and sequences. */
    settings: jsonb('settings').$type<Record<string, unknown>>().notNull().default({}),
    /** How failed attempts are retried; null: Kiln's default policy. */
    retry: jsonb('retry').$type<VersionRetryPolicy>(),
    createdAt: createdAt(),
  },
  (t) => [
    index('model_versions_model_idx').on(t.modelId, t.createdAt),
    // Who may use a blob is asked by digest (`files @> [{sha256}]`) at every upload and push.
    index('model_versions_files_idx').using('gin', sql`${t.files} jsonb_path_ops`),
  ],
);

/**
 * Which account uploaded (and so holds the bytes of) which blob. Blobs are stored once by
 * content, so this, and not the store, says who may see a digest or name it in a version.
 */
export const blobUploads = pgTable(
  'blob_uploads',
  {
    accountId: accountColumn('account_id'),
    sha256: text('sha256').notNull(),
    size: bigint('size', { mode: 'number' }).notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.sha256] })],
);

/** The read model of a prediction, written only by the prediction workflow's activities. */
export const predictions = pgTable(
  'predictions',
  {
    id: text('id').primaryKey(),
    accountId: accountColumn('account_id'),
    model: text('model').notNull(),
    versionId: text('version_id').notNull(),
    input: jsonb('input').$type<Record<string, unknown>>().notNull(),
    output: jsonb('output'),
    logs: text('logs').notNull().default(''),
    error: text('error'),
    status: text('status', { enum: predictionStatuses }).notNull(),
    metrics: jsonb('metrics').$type<Record<string, number | string>>().notNull().default({}),
    source: text('source', { enum: ['api', 'web'] })
      .notNull()
      .default('api'),
    webhook: text('webhook'),
    webhookEventsFilter: jsonb('webhook_events_filter').$type<WebhookEvent[]>(),
    /** Cancel-After: a prediction not finished by then is canceled (aborted if it never started). */
    deadline: timestamp('deadline', { withTimezone: true, mode: 'date' }),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    startedAt: timestamp('started_at', { withTimezone: true, mode: 'date' }),
    completedAt: timestamp('completed_at', { withTimezone: true, mode: 'date' }),
    /** Position of this row in the workflow's sequence of transitions: older writes never win. */
    revision: integer('revision').notNull().default(0),
    /**
     * The workflow run that wrote the row. Revisions count within a run: a run started by an
     * operator's reset counts again from its reset point, and its writes win over the old run's.
     */
    runId: text('run_id'),
    /** Times POST /v1/predictions/{id}/retry started it again: usage is metered once per value. */
    retries: integer('retries').notNull().default(0),
  },
  (t) => [
    index('predictions_account_created_idx').on(t.accountId, t.createdAt.desc(), t.id.desc()),
    // Every create counts the account's queued predictions (max_queued): with this, the count
    // reads the few rows still starting, not the account's whole history.
    index('predictions_account_starting_idx').on(t.accountId).where(sql`${t.status} = 'starting'`),
    // A waiting prediction's queue position reads the version's unfinished rows (db/queue.ts).
    index('predictions_version_unfinished_idx').on(t.versionId, t.status).where(sql`${t.status} in ('starting', 'processing')`),
    // And the version's recent service times.
    index('predictions_version_succeeded_idx').on(t.versionId, t.completedAt.desc()).where(sql`${t.status} = 'succeeded'`),
  ],
);

/**
 * What a prediction's SSE stream replays: output chunks from the engine, log lines and the final
 * done/error from the projection. The serial id orders events across writers; `seq` is the SSE
 * event id a client sees and resumes from.
 */
export const predictionEvents = pgTable(
  'prediction_events',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    predictionId: text('prediction_id').notNull(),
    event: text('event', { enum: streamEvents }).notNull(),
    data: text('data').notNull(),
    /** The engine attempt that wrote it (1 for the first); the events the projection writes (logs, done, error) carry 1. */
    attempt: integer('attempt').notNull().default(1),
    /**
     * Of an engine's output: the tokens of the whole text up to and with this chunk, so an attempt
     * that continues the text knows its length in tokens (re-tokenizing the text need not give it).
     */
    tokens: integer('tokens'),
    /**
     * The event's number in its prediction's stream (1, 2, …), given by a trigger from
     * `prediction_event_counters` (migration 0016): the serial id is one sequence for every
     * account, so a client that saw it would read the platform's volume. Never reused, not even
     * after a new run drops the old run's `done`.
     */
    seq: integer('seq').notNull().default(0),
    createdAt: createdAt(),
  },
  (t) => [
    index('prediction_events_prediction_idx').on(t.predictionId, t.id),
    uniqueIndex('prediction_events_prediction_seq_idx').on(t.predictionId, t.seq),
  ],
);

/** The last `seq` given in each prediction's stream (written only by migration 0016's trigger). */
export const predictionEventCounters = pgTable('prediction_event_counters', {
  predictionId: text('prediction_id').primaryKey(),
  lastSeq: integer('last_seq').notNull(),
});

/** Per-account signing secrets; during a rotation the previous one stays valid until it expires. */
export const webhookSecrets = pgTable(
  'webhook_secrets',
  {
    id: text('id').primaryKey(),
    accountId: accountColumn('account_id'),
    key: text('key').notNull(),
    createdAt: createdAt(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [index('webhook_secrets_account_idx').on(t.accountId, t.createdAt)],
);

/** One row per delivery attempt: what the receiver answered and how long it took. */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    predictionId: text('prediction_id').notNull(),
    accountId: text('account_id').notNull(),
    webhookId: text('webhook_id').notNull(),
    event: text('event', { enum: webhookEvents }).notNull(),
    url: text('url').notNull(),
    attempt: integer('attempt').notNull(),
    statusCode: integer('status_code'),
    latencyMs: integer('latency_ms'),
    error: text('error'),
    createdAt: createdAt(),
  },
  (t) => [index('webhook_deliveries_prediction_idx').on(t.predictionId, t.id)],
);

/** Fixed one-minute windows of requests per account and scope; shared by every API process. */
export const rateLimitCounters = pgTable(
  'rate_limit_counters',
  {
    accountId: text('account_id').notNull(),
    scope: text('scope').notNull(),
    windowStart: timestamp('window_start', { withTimezone: true, mode: 'date' }).notNull(),
    count: integer('count').notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.scope, t.windowStart] })],
);

/** Predictions holding an admission slot of their account, from admission to their end. */
export const admissions = pgTable(
  'admissions',
  {
    predictionId: text('prediction_id').primaryKey(),
    accountId: text('account_id').notNull(),
    admittedAt: createdAt(),
  },
  (t) => [index('admissions_account_idx').on(t.accountId)],
);

/** What each prediction used, written once when it ends. */
export const usageRecords = pgTable(
  'usage_records',
  {
    predictionId: text('prediction_id').notNull(),
    /** The prediction's `retries` when its run finished: each retry's run is metered, a reset's is not (it replaces its run). */
    retries: integer('retries').notNull().default(0),
    accountId: text('account_id').notNull(),
    model: text('model').notNull(),
    versionId: text('version_id').notNull(),
    task: text('task').notNull(),
    status: text('status').notNull(),
    hardware: text('hardware').notNull(),
    predictSeconds: real('predict_seconds').notNull().default(0),
    inputTokens: integer('input_tokens').notNull().default(0),
    /** Of the input tokens, those the engine found already evaluated (prefix reuse): metered apart, as they cost little. */
    cachedTokens: integer('cached_tokens').notNull().default(0),
    outputTokens: integer('output_tokens').notNull().default(0),
    images: integer('images').notNull().default(0),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.predictionId, t.retries] }), index('usage_account_created_idx').on(t.accountId, t.createdAt)],
);

/** Replicate's deployments: a stable name for a version with its own warm capacity. */
export const deployments = pgTable(
  'deployments',
  {
    id: text('id').primaryKey(),
    ownerId: accountColumn('owner_id'),
    owner: text('owner').notNull(),
    name: text('name').notNull(),
    modelId: text('model_id').notNull(),
    versionId: text('version_id').notNull(),
    hardware: text('hardware').notNull().default('cpu'),
    /** Replicas kept loaded at all times: never scaled to zero. */
    minInstances: integer('min_instances').notNull().default(0),
    maxInstances: integer('max_instances').notNull().default(1),
    release: integer('release').notNull().default(1),
    createdAt: createdAt(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('deployments_owner_name_idx').on(t.owner, t.name)],
);

/** Uploaded inputs (`POST /v1/files`) and output files of predictions, stored at `files/<id>`. */
export const files = pgTable(
  'files',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    name: text('name').notNull(),
    contentType: text('content_type').notNull(),
    size: bigint('size', { mode: 'number' }).notNull(),
    sha256: text('sha256').notNull(),
    predictionId: text('prediction_id'),
    createdAt: createdAt(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [index('files_account_created_idx').on(t.accountId, t.createdAt)],
);

/** Engine nodes: each engine worker process registers itself and heartbeats here. */
export const nodes = pgTable('nodes', {
  id: text('id').primaryKey(),
  memoryBytes: bigint('memory_bytes', { mode: 'number' }).notNull(),
  gpu: text('gpu'),
  /** Version ids loaded and polled on `model:<versionId>`, with their memory and last use. */
  loaded: jsonb('loaded').$type<LoadedVersion[]>().notNull().default([]),
  /** `prefill`, `decode` or `both` (KILN_ENGINE_ROLE): what placement sends here (domain/prefill-split.ts). */
  role: text('role').notNull().default('both'),
  /** Prompt tokens in flight, active sequences and their KV bytes, as of the last heartbeat: token-aware placement. */
  load: jsonb('load').$type<NodeLoad>(),
  heartbeatAt: timestamp('heartbeat_at', { withTimezone: true, mode: 'date' }).notNull().default(sql`now()`),
  startedAt: createdAt(),
});

/**
 * x-session-affinity: the node a session's requests on a version go to, so they find the tokens it
 * evaluated there. Kept while that node is live and serves the version; any other node takes over.
 */
export const sessionAffinities = pgTable(
  'session_affinities',
  {
    accountId: accountColumn('account_id'),
    session: text('session').notNull(),
    versionId: text('version_id').notNull(),
    nodeId: text('node_id').notNull(),
    usedAt: timestamp('used_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.versionId, t.session] })],
);

/**
 * The read model of a batch, written only by its workflow's activities (the API writes the first
 * row). Inputs, per-chunk results and the output live in object storage under `batches/<id>/`.
 */
export const batches = pgTable(
  'batches',
  {
    id: text('id').primaryKey(),
    accountId: accountColumn('account_id'),
    model: text('model').notNull(),
    versionId: text('version_id').notNull(),
    status: text('status', { enum: batchStatuses }).notNull(),
    total: integer('total').notNull(),
    completed: integer('completed').notNull().default(0),
    failed: integer('failed').notNull().default(0),
    chunkSize: integer('chunk_size').notNull(),
    /** Where the inputs came from: `inline`, `file:<id>` or the URL. */
    source: text('source').notNull(),
    error: text('error'),
    /** What happened along the way: failed attempts, resumptions, the output written. */
    logs: text('logs').notNull().default(''),
    outputFileId: text('output_file_id'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    startedAt: timestamp('started_at', { withTimezone: true, mode: 'date' }),
    completedAt: timestamp('completed_at', { withTimezone: true, mode: 'date' }),
    /** Position of this row in the workflow's sequence of writes: older writes never win. */
    revision: integer('revision').notNull().default(0),
    /** The workflow run that wrote the row (predictions.runId says why). */
    runId: text('run_id'),
    /** 1, then one more for each retry (POST /v1/batches/{id}/retry) that redoes its failed items. */
    attempt: integer('attempt').notNull().default(1),
  },
  (t) => [index('batches_account_created_idx').on(t.accountId, t.createdAt.desc(), t.id.desc())],
);

/**
 * An OpenAI Responses API response (`resp_<prediction id>`): the request behind one prediction of a
 * text-generation model, so that the response can be read, streamed, chained and cancelled by its
 * own id. Its status and output are the prediction's (read from that row, never copied), so the
 * response is exactly as durable as the prediction, and goes when the prediction does.
 */
export const responses = pgTable(
  'responses',
  {
    id: text('id').primaryKey(),
    accountId: accountColumn('account_id'),
    predictionId: text('prediction_id')
      .notNull()
      .references(() => predictions.id, { onDelete: 'cascade' }),
    /** The response this one continues (its input and output come before this one's input). */
    previousResponseId: text('previous_response_id'),
    /** The session-affinity key the chain runs under: the first response's id, or the caller's x-session-affinity. */
    session: text('session').notNull(),
    /** The request's parameters, echoed in the response object. */
    request: jsonb('request').$type<Record<string, unknown>>().notNull(),
    /** The model's context when the response was made: an answer that fills it is incomplete. */
    contextSize: integer('context_size'),
    /** The request's own input items (not the earlier responses'), each with its id. */
    inputItems: jsonb('input_items').$type<Array<Record<string, unknown>>>().notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [index('responses_prediction_idx').on(t.predictionId)],
);
