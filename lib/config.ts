/**
 * Every process reads its configuration here, once, from the environment.
 * A missing or malformed variable stops the process at start with the variable named.
 */
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { DURATION_LIST, retentionMs } from './duration';

const bool = z
  .enum(['true', 'false', '1', '0'])
  .transform((v) => v === 'true' || v === '1');

/** KILN_LLAMA_SOURCE_BUILD: auto, or the bool spellings (workers/engines/llama-backend.ts reads it too). */
export const llamaSourceBuild = z
  .enum(['auto', 'true', 'false', '1', '0'])
  .transform((v): 'auto' | 'true' | 'false' => (v === '1' ? 'true' : v === '0' ? 'false' : v));

const hexKey = z.string().regex(/^[0-9a-fA-F]{64}$/, '32 bytes as 64 hex digits');

export const configSchema = z.object({
  KILN_ENV: z.enum(['development', 'test', 'production']).default('development'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  KILN_DATA_DIR: z.string().default(path.resolve('.data')),

  HOST: z.string().default('127.0.0.1'),
  PORT: z.coerce.number().int().min(1).max(65535).default(8080),
  /**
   * Base of the absolute URLs the API writes (prediction, file and stream URLs, OpenAPI servers).
   * Unset: http://HOST:PORT, never the Host a client sends. Set it behind a proxy or a name.
   */
  KILN_PUBLIC_URL: z.url().optional(),
  /** The bearer token a metrics scraper sends for the API's /metrics; unset, the API does not serve it. */
  KILN_METRICS_TOKEN: z.string().min(16).optional(),
  /**
   * The Temporal UI operators open. Set, each prediction's JSON from the API links its workflow there
   * (urls.temporal_ui): set it where the API's readers are the operators (one team, local development;
   * npm start sets the dev server's). Webhook bodies never carry it. Unset, the playground assumes :8233.
   */
  KILN_TEMPORAL_UI_URL: z.url().optional(),
  /** Set, each process exports OpenTelemetry traces there over OTLP/HTTP (lib/tracing.ts). */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url().optional(),
  /**
   * The operator's bearer token for the codec server (/codec/decode, /codec/encode), which shows
   * referenced payloads in the Temporal UI and CLI; unset, the API does not serve it.
   */
  KILN_OPERATOR_TOKEN: z.string().min(16).optional(),
  /** Origins (comma-separated) whose pages may call the codec server: the Temporal UI's. */
  KILN_CODEC_CORS_ORIGINS: z
    .string()
    .default('http://localhost:8233,http://127.0.0.1:8233')
    .transform((s) => s.split(',').map((o) => o.trim().replace(/\/$/, '')).filter(Boolean)),

  /**
   * Root of the keys that sign capability URLs (streams, files, file references; see
   * lib/signing.ts). The API and the control worker need it; engine nodes never get it, only the
   * two purpose keys below. Generated per user for local development.
   */
  KILN_URL_SIGNING_KEY: z.string().min(16).optional(),
  /** Engine nodes: the key that checks signed file URLs in inputs (purposeKey(root, 'file'), hex). */
  KILN_FILE_URL_KEY: hexKey.optional(),
  /** Engine nodes: the key that signs `kiln-file:` references in outputs (purposeKey(root, 'ref'), hex). */
  KILN_FILE_REF_KEY: hexKey.optional(),
  /**
   * Encrypts secrets stored in the database (webhook signing secrets), AES-256-GCM; 32 bytes, hex.
   * The API and the control worker need it. To rotate, move the old key to KILN_SECRETS_PREVIOUS_KEYS
   * and run setup (or `npm run admin -- secrets reseal`).
   */
  KILN_SECRETS_KEY: hexKey.optional(),
  /** Keys that may still have sealed stored secrets (comma-separated hex), read but never written. */
  KILN_SECRETS_PREVIOUS_KEYS: z
    .string()
    .regex(/^\s*([0-9a-fA-F]{64}\s*(,\s*|$))*$/, 'a comma-separated list of 64-hex-digit keys')
    .optional(),
  /** The password setup gives the engine's database role (kiln_engine). */
  KILN_ENGINE_DB_PASSWORD: z.string().min(16).optional(),

  /** Webhooks to private or loopback addresses are refused unless this is set (local stacks set it). */
  KILN_WEBHOOK_ALLOW_PRIVATE: bool.default(false),
  /** Delays between delivery attempts; the last one repeats until the attempts run out. */
  KILN_WEBHOOK_RETRY_SCHEDULE: z
    .string()
    .regex(DURATION_LIST, 'a comma-separated list like 5s,5m,30m,2h')
    .default('5s,5m,30m,2h,5h,10h,10h'),
  KILN_WEBHOOK_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(50).default(8),

  DATABASE_URL: z.string().startsWith('postgres').default('postgres://postgres@127.0.0.1:5432/kiln'),

  TEMPORAL_ADDRESS: z.string().default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().default('default'),
  KILN_CONTROL_QUEUE: z.string().default('kiln-control'),
  /**
   * How long Temporal keeps a closed workflow's history (the namespace's retention; setup applies
   * it). Past it a projection row can no longer be rebuilt from Temporal (the full server archives
   * histories to S3 first: infra/temporal-server.sh). Whole days or hours, e.g. 7d or 36h.
   */
  KILN_TEMPORAL_RETENTION: z
    .string()
    .regex(/^[1-9]\d*[dh]$/, 'a whole number of days or hours, like 7d or 36h')
    .refine((v) => retentionMs(v) >= 24 * 3_600_000, 'at least a day (Temporal refuses less)')
    .default('7d'),
  /** Where a worker serves /metrics (0: not at all). The API serves it on its own port. */
  KILN_METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(0),
  /** Workflow tasks and local activities the control worker runs at once. */
  KILN_CONTROL_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(8),

  S3_ENDPOINT: z.url().default('http://127.0.0.1:9000'),
  S3_REGION: z.string().default('us-east-1'),
  S3_ACCESS_KEY_ID: z.string().min(1),
  S3_SECRET_ACCESS_KEY: z.string().min(1),
  /** Temporary credentials (an STS session, as engine nodes get) come with a session token. */
  S3_SESSION_TOKEN: z.string().min(1).optional(),
  S3_BUCKET: z.string().min(3).default('kiln'),
  S3_FORCE_PATH_STYLE: bool.default(true),
  /**
   * Temporal payloads (workflow and activity arguments and results) bigger than this are stored in
   * the bucket under payloads/sha256/ and the history holds a reference (lib/payload-refs.ts).
   * Temporal refuses payloads over 2 MB and warns from 512 KiB.
   */
  KILN_PAYLOAD_INLINE_MAX_BYTES: z.coerce.number().int().min(1024).max(1024 * 1024).default(128 * 1024),
  /** Referenced payloads each process keeps decoded in memory, in MiB (a replayed workflow reads its input once). */
  KILN_PAYLOAD_CACHE_MB: z.coerce.number().int().min(1).default(64),

  /** Engine node identity and budget. */
  KILN_NODE_ID: z.string().regex(/^[a-zA-Z0-9_.-]+$/).default(os.hostname()),
  KILN_NODE_MEMORY_MB: z.coerce.number().int().positive().default(Math.floor(os.totalmem() / 2 ** 20 / 2)),
  /** Concurrent sequences per loaded llama.cpp model (continuous batching). */
  KILN_ENGINE_SEQUENCES: z.coerce.number().int().min(1).max(64).default(4),
  KILN_ENGINE_CONTEXT_SIZE: z.coerce.number().int().min(256).default(4096),
  /**
   * A stream's first chunk is written at once; later ones are gathered this long into one write
   * (and one read by each SSE reader), and the last goes when the generation ends. At 15 ms a fast
   * model's stream cost the API and Postgres about half as much again (README, Streaming).
   */
  KILN_STREAM_BATCH_MS: z.coerce.number().int().min(0).max(1000).default(50),
  /** The most a version's settings may ask for: each multiplies the memory a loaded copy holds. */
  KILN_MAX_CONTEXT_SIZE: z.coerce.number().int().min(256).default(32768),
  KILN_MAX_SEQUENCES: z.coerce.number().int().min(1).max(64).default(16),
  /**
   * The share of one node's memory that one account's pinned replicas (deployments'
   * min_instances) may hold; past it they are evicted and scaled to zero like any other.
   */
  KILN_PINNED_NODE_SHARE: z.coerce.number().gt(0).max(1).default(0.5),
  /**
   * CPU threads per context. llama.cpp's threads spin while they wait: more threads than free
   * cores makes generation orders of magnitude slower, so leave a core to the rest of the node.
   */
  KILN_ENGINE_THREADS: z.coerce.number().int().min(1).default(Math.max(1, os.availableParallelism() - 1)),
  /** Inputs fetched from URLs: private addresses refused unless allowed; size and time bounded. */
  KILN_FETCH_ALLOW_PRIVATE: bool.default(false),
  KILN_FETCH_MAX_BYTES: z.coerce.number().int().positive().default(50 * 2 ** 20),
  KILN_FETCH_TIMEOUT_MS: z.coerce.number().int().positive().default(30_000),
  /** Scale to zero: a model version idle this long is unloaded (a version's settings may say otherwise). */
  KILN_MODEL_IDLE_TTL_SECONDS: z.coerce.number().int().min(1).default(600),
  /** Model files bigger than this come down in parts, several ranged GETs at once. */
  KILN_MODEL_RANGED_MIN_MB: z.coerce.number().int().min(1).default(64),
  /** Ranged GETs at once for one big model file (1: one stream, as for small files). */
  KILN_MODEL_DOWNLOAD_STREAMS: z.coerce.number().int().min(1).max(32).default(4),
  /** Predictions waiting per replica on a version's queue before the scaler adds a replica. */
  KILN_REPLICA_BACKLOG: z.coerce.number().int().min(1).default(8),
  /** Replicas of a version no deployment bounds (a deployment's max_instances bounds its own). */
  KILN_MAX_REPLICAS: z.coerce.number().int().min(1).max(64).default(4),
  /** How often the replica scaler looks at the backlogs. */
  KILN_REPLICA_CHECK_MS: z.coerce.number().int().min(200).default(2_000),
  /** How often the reconciler looks for rows and admission slots whose workflow closed early. */
  KILN_RECONCILE_INTERVAL_MS: z.coerce.number().int().min(200).default(5_000),
  /** Rows and slots younger than this are left to their workflow (it has barely begun). */
  KILN_RECONCILE_MIN_AGE_MS: z.coerce.number().int().min(0).default(5_000),
  /** Chunks of one batch run at once (each takes one of the model's sequences while it runs). */
  KILN_BATCH_PARALLELISM: z.coerce.number().int().min(1).max(64).default(2),
  /** Chunks one run of a batch workflow starts before it continues as new (keeps each history short). */
  KILN_BATCH_CHUNKS_PER_RUN: z.coerce.number().int().min(1).max(5000).default(500),
  /** The most bytes of a batch's input file (input_file or input_url), which the API reads into memory whole. */
  KILN_BATCH_INPUT_MAX_BYTES: z.coerce.number().int().positive().default(50 * 2 ** 20),
  /** Serve the echo fixture (a sleeping stand-in for an engine) for tests and benchmarks. */
  KILN_ENABLE_FIXTURES: bool.default(false),
  KILN_ENGINE_GPU: z.enum(['auto', 'false', 'cuda', 'vulkan', 'metal']).default('auto'),
  /**
   * CPU hosts: llama.cpp built from node-llama-cpp's source for this CPU (infra/llama-addon-build.sh,
   * cached per user) instead of the prebuilt (issue 19: about twice the prompt speed on an AVX-512
   * host). auto: run it where it is cached (built by `KILN_LLAMA_SOURCE_BUILD=true npm start` or by
   * the benchmarks that compare with llama.cpp), else the prebuilt; true: also build it at install
   * (half an hour on two cores, once); false: always the prebuilt.
   */
  KILN_LLAMA_SOURCE_BUILD: llamaSourceBuild.default('auto'),
});

export type Config = z.infer<typeof configSchema>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export function parseConfig(env: NodeJS.ProcessEnv): Config {
  const result = configSchema.safeParse(env);
  if (!result.success) {
    const lines = result.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  return result.data;
}

let cached: Config | undefined;

/** The process's configuration, parsed on first use. */
export function config(): Config {
  cached ??= parseConfig(process.env);
  return cached;
}
