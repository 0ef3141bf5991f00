/**
 * docs/configuration.md, rendered from the configuration schema (lib/config.ts): one table per
 * group of variables, each with its default and its `.describe()` text, then the variables only
 * the scripts read. `npm run docs:config` writes the page; test/unit/config-doc.test.ts fails when
 * the page in the tree is not what this renders.
 *
 * A new key in the schema needs a `.describe()` there and a group here (the compiler asks for the
 * group); a default computed from the machine needs a line in `computedDefaults`, or the page
 * would differ from one machine to the next.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { configSchema } from '../lib/config';

export type ConfigKey = keyof typeof configSchema.shape;

export const CONFIG_DOC_PATH = path.resolve(__dirname, '..', 'docs', 'configuration.md');

/** The groups, in the page's order, each with the line that opens its table. */
export const configGroupOrder = [
  { name: 'Process', intro: 'Every process.' },
  { name: 'API', intro: 'Where the API listens and the address clients see.' },
  { name: 'Postgres', intro: 'Accounts, tokens, models, projections, usage and nodes.' },
  { name: 'Temporal', intro: 'The server, the namespace and the control worker.' },
  {
    name: 'Payloads by reference',
    intro: 'Large Temporal payloads go to the bucket ([architecture.md](architecture.md#payloads-by-reference)).',
  },
  { name: 'Object storage', intro: 'Any S3-compatible store: MinIO locally, S3, R2 or a distributed MinIO in production.' },
  { name: 'Keys and secrets', intro: 'Who holds each and how to rotate it: [security.md](security.md#keys-and-credentials).' },
  {
    name: 'Operators and observability',
    intro: 'The Temporal UI link, the codec server, metrics and traces ([operations.md](operations.md)).',
  },
  { name: 'Webhooks', intro: 'Delivery of prediction events ([api.md](api.md#webhooks)).' },
  { name: 'Inputs fetched from URLs', intro: 'Image URLs of predictions and `input_url`s of batches.' },
  { name: 'Batches', intro: 'Many inputs for one model ([api.md](api.md#batches)).' },
  { name: 'Engine nodes', intro: 'What an engine worker offers and how it runs models.' },
  { name: 'Versions, placement and replicas', intro: "Caps on a version's settings and how many nodes serve it." },
  { name: 'Tests and benchmarks', intro: 'Never on in production.' },
] as const;

export type ConfigGroup = (typeof configGroupOrder)[number]['name'];

/** Each variable's group: the compiler insists that every key of the schema has one. */
export const configGroups: Record<ConfigKey, ConfigGroup> = {
  KILN_ENV: 'Process',
  LOG_LEVEL: 'Process',
  KILN_DATA_DIR: 'Process',

  HOST: 'API',
  PORT: 'API',
  KILN_PUBLIC_URL: 'API',
  KILN_MAX_OPEN_STREAMS: 'API',
  KILN_MAX_WAITING_REQUESTS: 'API',
  KILN_OPEN_CONNECTION_RECHECK_MS: 'API',
  KILN_API_STREAM_DB_CONNECTIONS: 'API',

  DATABASE_URL: 'Postgres',

  TEMPORAL_ADDRESS: 'Temporal',
  TEMPORAL_NAMESPACE: 'Temporal',
  KILN_CONTROL_QUEUE: 'Temporal',
  KILN_TEMPORAL_RETENTION: 'Temporal',
  KILN_CONTROL_CONCURRENCY: 'Temporal',
  KILN_RECONCILE_INTERVAL_MS: 'Temporal',
  KILN_RECONCILE_MIN_AGE_MS: 'Temporal',

  KILN_PAYLOAD_INLINE_MAX_BYTES: 'Payloads by reference',
  KILN_PAYLOAD_CACHE_MB: 'Payloads by reference',

  S3_ENDPOINT: 'Object storage',
  S3_REGION: 'Object storage',
  S3_BUCKET: 'Object storage',
  S3_ACCESS_KEY_ID: 'Object storage',
  S3_SECRET_ACCESS_KEY: 'Object storage',
  S3_SESSION_TOKEN: 'Object storage',
  S3_FORCE_PATH_STYLE: 'Object storage',

  KILN_URL_SIGNING_KEY: 'Keys and secrets',
  KILN_FILE_URL_KEY: 'Keys and secrets',
  KILN_FILE_REF_KEY: 'Keys and secrets',
  KILN_SECRETS_KEY: 'Keys and secrets',
  KILN_SECRETS_PREVIOUS_KEYS: 'Keys and secrets',
  KILN_ENGINE_DB_PASSWORD: 'Keys and secrets',

  KILN_TEMPORAL_UI_URL: 'Operators and observability',
  KILN_OPERATOR_TOKEN: 'Operators and observability',
  KILN_CODEC_CORS_ORIGINS: 'Operators and observability',
  KILN_METRICS_TOKEN: 'Operators and observability',
  KILN_METRICS_PORT: 'Operators and observability',
  OTEL_EXPORTER_OTLP_ENDPOINT: 'Operators and observability',

  KILN_WEBHOOK_ALLOW_PRIVATE: 'Webhooks',
  KILN_WEBHOOK_RETRY_SCHEDULE: 'Webhooks',
  KILN_WEBHOOK_MAX_ATTEMPTS: 'Webhooks',
  KILN_WEBHOOK_ROTATIONS_PER_MINUTE: 'Webhooks',
  KILN_WEBHOOK_REDELIVERIES_PER_MINUTE: 'Webhooks',

  KILN_FETCH_ALLOW_PRIVATE: 'Inputs fetched from URLs',
  KILN_FETCH_MAX_BYTES: 'Inputs fetched from URLs',
  KILN_FETCH_TIMEOUT_MS: 'Inputs fetched from URLs',

  KILN_BATCH_PARALLELISM: 'Batches',
  KILN_BATCH_CHUNKS_PER_RUN: 'Batches',
  KILN_BATCH_INPUT_MAX_BYTES: 'Batches',

  KILN_NODE_ID: 'Engine nodes',
  KILN_NODE_MEMORY_MB: 'Engine nodes',
  KILN_ENGINE_ROLE: 'Engine nodes',
  KILN_ENGINE_SEQUENCES: 'Engine nodes',
  KILN_ENGINE_CONTEXT_SIZE: 'Engine nodes',
  KILN_ENGINE_THREADS: 'Engine nodes',
  KILN_ENGINE_GPU: 'Engine nodes',
  KILN_LLAMA_SOURCE_BUILD: 'Engine nodes',
  KILN_OPTIONAL_MODELS: 'Engine nodes',
  KILN_STREAM_BATCH_MS: 'Engine nodes',
  KILN_MODEL_IDLE_TTL_SECONDS: 'Engine nodes',
  KILN_KV_SNAPSHOT_DISK_MB: 'Engine nodes',
  KILN_KV_SNAPSHOT_MIN_TOKENS: 'Engine nodes',
  KILN_KV_SNAPSHOT_OBJECT_MB: 'Engine nodes',
  KILN_MODEL_RANGED_MIN_MB: 'Engine nodes',
  KILN_MODEL_DOWNLOAD_STREAMS: 'Engine nodes',

  KILN_MAX_CONTEXT_SIZE: 'Versions, placement and replicas',
  KILN_PREFILL_SPLIT_MIN_TOKENS: 'Versions, placement and replicas',
  KILN_MAX_SEQUENCES: 'Versions, placement and replicas',
  KILN_PINNED_NODE_SHARE: 'Versions, placement and replicas',
  KILN_REPLICA_BACKLOG: 'Versions, placement and replicas',
  KILN_MAX_REPLICAS: 'Versions, placement and replicas',
  KILN_REPLICA_CHECK_MS: 'Versions, placement and replicas',

  KILN_ENABLE_FIXTURES: 'Tests and benchmarks',
};

/** Defaults the schema computes from the machine it runs on, as the page states them. */
export const computedDefaults: Partial<Record<ConfigKey, string>> = {
  KILN_DATA_DIR: '`.data` in the working directory',
  KILN_NODE_ID: 'the host name',
  KILN_NODE_MEMORY_MB: 'half the RAM',
  KILN_ENGINE_THREADS: 'the CPU cores',
};

/** A variable the scripts read (infra/, bench/, cli/) that the processes' schema does not. */
export interface ScriptVariable {
  names: string[];
  default: string;
  description: string;
  readBy: string[];
}

/** The variables only the scripts and tools read: the schema above never sees them. */
export const scriptVariables: ScriptVariable[] = [
  {
    names: ['KILN_TEMPORAL'],
    default: '`dev`',
    description:
      "`dev`: the Temporal CLI's dev server; `server`: the full Temporal server on Postgres ([production.md](production.md#temporal-server-on-postgres)), with `TEMPORAL_ADDRESS` pointed at it.",
    readBy: ['infra/env.sh', 'infra/services.sh', 'infra/status.ts'],
  },
  {
    names: ['KILN_CODE'],
    default: '`dist`',
    description: '`dist`: `npm start` and `npm test` run the compiled build, rebuilt when a source changed; `tsx`: the TypeScript sources.',
    readBy: ['infra/app.sh'],
  },
  {
    names: ['KILN_CACHE'],
    default: '`$XDG_CACHE_HOME/kiln`, else `~/.cache/kiln`',
    description:
      "The per-user cache: Go-built binaries (`bin/<name>-<version>/`), the local secrets (`local-secrets.env`), llama.cpp source builds, where the engine worker looks for its own, installed npm trees (`npm-trees/`), and `kiln models pull`'s downloads (`hub/`).",
    readBy: ['infra/env.sh', 'lib/llama-cpu-build.ts', 'cli/pull.ts'],
  },
  {
    names: ['KILN_NPM_TREES'],
    default: '`true`',
    description:
      "`true`: a checkout whose `package-lock.json` and `patches/` were installed before on this machine gets hard links to that installed tree (`KILN_CACHE/npm-trees/<hash>/`, the newest 3 kept) in about a second instead of `npm install` (about a minute); a fresh install is kept there for the next checkout. The files are shared, as pnpm's store shares them: a package's file written in place changes it in every linked checkout. `false`: `npm install` in every checkout.",
    readBy: ['infra/install.sh'],
  },
  {
    names: ['KILN_ENGINE_PER_GPU'],
    default: '`true`',
    description: '`false`: one engine worker for all GPUs, not one per GPU (`npm test` sets it).',
    readBy: ['infra/app.sh'],
  },
  {
    names: ['KILN_GPU_SOURCE_BUILD'],
    default: '`true`',
    description: '`false`: a GPU host never builds llama.cpp from source ([production.md](production.md#gpu-hosts)).',
    readBy: ['infra/gpu-install.ts'],
  },
  {
    names: ['KILN_GPU_STATE_DIR'],
    default: '`.data`',
    description: 'Where the GPU host check writes `gpu-build.json` and `gpu-build.env` (under systemd, `/var/lib/kiln`).',
    readBy: ['infra/gpu-install.sh', 'infra/app.sh', 'infra/status.ts'],
  },
  {
    names: ['KILN_NVIDIA_SMI'],
    default: '`nvidia-smi`',
    description: 'The command that lists GPUs; a stand-in drives the per-GPU path on a CPU host.',
    readBy: ['infra/start.sh', 'infra/install.sh', 'infra/gpu-install.sh', 'infra/gpu-host.ts'],
  },
  {
    names: ['KILN_ENGINE_S3_ACCESS_KEY_ID', 'KILN_ENGINE_S3_SECRET_ACCESS_KEY'],
    default: 'unset: an STS session',
    description:
      "The engine's own S3 credentials, taken as they are; unset, setup asks the store's STS for a session narrowed by an inline policy.",
    readBy: ['infra/engine-s3.ts', 'infra/app.sh'],
  },
  {
    names: ['KILN_CONTROL_METRICS_PORT', 'KILN_ENGINE_METRICS_PORT'],
    default: '`9464`, `9465`',
    description:
      '`KILN_METRICS_PORT` of the control worker and of the engine worker (+ GPU index) under `npm start` (`npm test`: 9474 and 9475 + 10 × `KILN_TEST_SLOT`; `npm run bench`: 9454 and 9455).',
    readBy: ['infra/run-app.sh'],
  },
  {
    names: ['KILN_NODE_FLAGS'],
    default: 'unset',
    description: "Flags for every Kiln process's `node`, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` (flags NODE_OPTIONS refuses).",
    readBy: ['infra/app.sh'],
  },
  {
    names: ['KILN_CONTROL_NICE'],
    default: '`0`',
    description:
      "The `nice` (0–19) of the control plane the local stack starts: the API, the control worker, and the Temporal dev server, MinIO and Postgres where `npm start` or `npm test` starts them (a service already running keeps its own). Above 0 the engine's llama.cpp threads win a core when both want it, and the control plane runs on what they leave.",
    readBy: ['infra/run-app.sh', 'infra/services.sh', 'infra/suite-services.sh', 'infra/env.sh'],
  },
  {
    names: ['KILN_ENGINE_NICE'],
    default: '`0`',
    description:
      "The `nice` (−20–19) of the engine worker. Below 0 its llama.cpp threads win a core over every other process of the host, Kiln's control plane included; that takes root or `CAP_SYS_NICE`, and without it the engine logs one line and runs at the priority it was started with.",
    readBy: ['infra/run-app.sh'],
  },
  {
    names: ['KILN_ARCHIVE_BUCKET'],
    default: '`kiln-archive`',
    description: "The full server's archival bucket (Temporal's `s3store`, on MinIO).",
    readBy: ['infra/temporal-server.sh'],
  },
  {
    names: ['KILN_TEMPORAL_FAIRNESS'],
    default: '`true`',
    description: '`matching.enableFairness` of the local Temporal servers, which the per-account fair queues rely on.',
    readBy: ['infra/services.sh', 'infra/temporal-server.sh'],
  },
  {
    names: ['KILN_TEMPORAL_PARTITIONS'],
    default: '`1`',
    description:
      'Read and write partitions per task queue on the local Temporal servers; one makes fair dispatch exact ([production.md](production.md#scaling-out)).',
    readBy: ['infra/services.sh', 'infra/temporal-server.sh'],
  },
  {
    names: ['KILN_TEMPORAL_HISTORY_SHARDS', 'KILN_TEMPORAL_LOG_LEVEL'],
    default: '`4`, `warn`',
    description: "The full server's `numHistoryShards` and log level.",
    readBy: ['infra/temporal-server.sh'],
  },
  {
    names: ['KILN_TEMPORAL_PG_HOST', 'KILN_TEMPORAL_PG_PORT', 'KILN_TEMPORAL_PG_USER'],
    default: '`127.0.0.1`, `5432`, `postgres`',
    description: "The Postgres of the full server's stores (databases `temporal` and `temporal_visibility`).",
    readBy: ['infra/temporal-server.sh'],
  },
  {
    names: ['KILN_TEST_SLOT'],
    default: '`0`',
    description:
      '`npm test`: 1–9 gives a checkout its own ports, Temporal dev server (17233 + slot), Postgres cluster (15432 + slot), bucket and task queues, so two checkouts can run suites at once.',
    readBy: ['infra/test.sh', 'bench/process-start.sh'],
  },
  {
    names: ['KILN_TEST_LANES', 'KILN_TEST_LANE'],
    default: '`4` (`1` when files are named on the command line)',
    description:
      "`npm test` runs the suite in this many lanes (1–5) at once, each a stack of its own (API, workers, Temporal dev server, Postgres cluster, namespace, bucket) running its share of the files in band, split by their last durations. Lane 0 has the slot's ports; lane K ≥ 1 has API 8200 + 10n, metrics 9200 + 10n, OTLP 4400 + 10n, Temporal 17300 + n, its UI 18300 + n, Postgres 15500 + n (n = 4 × slot + K − 1), names suffixed `-l<K>`. `KILN_TEST_LANE` is set for each lane's processes (its network namespaces' subnet).",
    readBy: ['infra/test.sh', 'infra/netns-hosts.sh'],
  },
  {
    names: ['KILN_TEST_PORT', 'KILN_TEST_DATABASE_URL'],
    default: '8081 + 10 × slot; `postgres://postgres@127.0.0.1:15432/kiln_test` (port 15432 + slot, `kiln_test_<slot>`)',
    description:
      "The test suite's API port (of lane 0) and database. A database named here is used as it is (the suite then runs one lane and no Postgres of its own, and the Postgres chaos test restarts that database's cluster).",
    readBy: ['infra/test.sh'],
  },
  {
    names: ['KILN_BENCH_SLOT'],
    default: '`0`',
    description:
      '`npm run bench`: 1–9 gives a run its own port (8070 − 10 × slot), metrics ports (9454 and 9455 − 10 × slot), database (`kiln_bench_<slot>`), namespace and bucket (`kiln-bench-<slot>`), node id and run directory (`.data/bench-stack-<slot>`), so two checkouts can run stack benchmarks at once.',
    readBy: ['infra/bench.sh'],
  },
  {
    names: ['KILN_BENCH_PORT', 'KILN_BENCH_DATABASE_URL'],
    default: '8070 − 10 × slot; `postgres://postgres@127.0.0.1:5432/kiln_bench` (`kiln_bench_<slot>`)',
    description: "The benchmarks' API port and database.",
    readBy: ['infra/bench.sh'],
  },
  {
    names: ['KILN_CHROMIUM'],
    default: '`/usr/bin/chromium`',
    description: "The browser of the playground's test; set, `npm test` installs none.",
    readBy: ['infra/install.sh', 'test/e2e/playground.test.ts'],
  },
  {
    names: ['KILN_LLAMA_BATCHED_BENCH'],
    default: 'built into the cache',
    description: "llama.cpp's `llama-batched-bench`, the engine benchmarks' floor; unset, `infra/llama-batched-bench.sh` builds it once.",
    readBy: ['bench/llama-floor.ts'],
  },
  {
    names: ['KILN_LLAMA_SERVER'],
    default: 'built into the cache',
    description:
      "llama.cpp's own `llama-server`, which the chat agreement benchmark sets Kiln's chats beside; unset, `infra/llama-server.sh` builds it once.",
    readBy: ['bench/chat-agreement.ts'],
  },
  {
    names: ['KILN_STATUS_DATABASE_URL'],
    default: '`postgres://postgres@127.0.0.1:5432/postgres`',
    description: 'Where `npm run status` checks that Postgres answers.',
    readBy: ['infra/status.ts'],
  },
  {
    names: ['KILN_API_URL', 'KILN_API_TOKEN'],
    default: "`http://127.0.0.1:8080`; `kiln login`'s, else `.data/api-token`",
    description: "The API and token of the `kiln` CLI and the benchmarks (`kiln login`'s saved URL comes after `KILN_API_URL`).",
    readBy: ['cli/client.ts', 'cli/commands.ts', 'bench/lib.ts'],
  },
  {
    names: ['KILN_HUB_URL', 'HF_TOKEN'],
    default: '`https://huggingface.co`; unset',
    description:
      'The Hugging Face-style hub `kiln models pull hf://…` downloads from (`--hub` overrides it), and the token sent to it as a bearer token (never to the CDN its redirects name), for gated and private repositories.',
    readBy: ['cli/pull.ts'],
  },
  {
    names: ['KILN_HUB_MAX_MB', 'KILN_HUB_MAX_CONTEXT_SIZE'],
    default: '`65536`; `8192`',
    description:
      "`kiln models pull` refuses a file larger than this many MiB before downloading it (`--max-size`), and gives the version the GGUF's trained context up to this many tokens (`--max-context`).",
    readBy: ['cli/pull.ts'],
  },
  {
    names: ['KILN_RUN_DIR'],
    default: '`.data`',
    description:
      "Where a stack's pid, ready and log files go; the scripts set it (`npm test`: `.data/test`; `npm run bench`: `.data/bench-stack`).",
    readBy: ['infra/env.sh'],
  },
  {
    names: ['KILN_READY_FILE'],
    default: 'set by the supervisor',
    description: 'The file a process writes its pid to once it is ready (`lib/ready.ts`).',
    readBy: ['infra/supervisor.ts', 'lib/ready.ts'],
  },
  {
    names: ['KILN_ROOT'],
    default: 'set by `infra/env.sh`',
    description: 'The checkout the scripts run in.',
    readBy: ['infra/env.sh', 'infra/checkout.ts'],
  },
];

/** zod 4's internals, as far as the page reads them. */
interface SchemaView {
  description?: string;
  def: {
    type: string;
    innerType?: SchemaView;
    in?: SchemaView;
    defaultValue?: unknown;
    entries?: Record<string, string>;
    format?: string;
    checks?: Array<{ _zod: { def: { check: string; value?: unknown; inclusive?: boolean } } }>;
  };
  isInt?: boolean;
}

const BOOL_SPELLINGS = ['true', 'false', '1', '0'];

interface Field {
  defaultValue?: unknown;
  hasDefault: boolean;
  optional: boolean;
  /** What the variable accepts, where the schema says more than "text". */
  accepts?: string;
}

function code(v: unknown): string {
  return `\`${String(v)}\``;
}

function numberRange(s: SchemaView): string {
  const int = s.isInt === true;
  let low: { value: number; inclusive: boolean } | undefined;
  let high: { value: number; inclusive: boolean } | undefined;
  for (const { _zod } of s.def.checks ?? []) {
    const { check, value, inclusive = false } = _zod.def;
    if (typeof value !== 'number') continue;
    // An integer above n is at least n + 1.
    if (check === 'greater_than') low = int && !inclusive ? { value: value + 1, inclusive: true } : { value, inclusive };
    if (check === 'less_than') high = int && !inclusive ? { value: value - 1, inclusive: true } : { value, inclusive };
  }
  const kind = int ? 'an integer' : 'a number';
  if (low?.inclusive && high?.inclusive) return `${kind}, ${low.value}–${high.value}`;
  const bounds = [
    low && `${low.inclusive ? 'at least' : 'above'} ${low.value}`,
    high && `${high.inclusive ? 'at most' : 'below'} ${high.value}`,
  ].filter(Boolean);
  return bounds.length ? `${kind}, ${bounds.join(' and ')}` : kind;
}

function enumValues(s: SchemaView): string {
  const values = Object.values(s.def.entries ?? {});
  const allBools = BOOL_SPELLINGS.every((v) => values.includes(v));
  if (!allBools) return `one of ${values.map(code).join(', ')}`;
  const others = values.filter((v) => !BOOL_SPELLINGS.includes(v));
  const bools = '`true` or `false` (or `1`, `0`)';
  return others.length === 0 ? bools : `${others.map(code).join(', ')}, ${bools}`;
}

function accepts(s: SchemaView): string | undefined {
  switch (s.def.type) {
    case 'enum':
      return enumValues(s);
    case 'number':
      return numberRange(s);
    case 'string':
      return s.def.format === 'url' ? 'a URL' : undefined;
    case 'pipe':
      return s.def.in ? accepts(s.def.in) : undefined;
    default:
      return undefined;
  }
}

/** Unwraps optional, default and the input side of a transform to what the variable is and accepts. */
function fieldOf(schema: SchemaView): Field {
  const field: Field = { hasDefault: false, optional: false };
  let s: SchemaView | undefined = schema;
  while (s) {
    if (s.def.type === 'optional') {
      field.optional = true;
      s = s.def.innerType;
    } else if (s.def.type === 'default') {
      field.hasDefault = true;
      field.defaultValue = s.def.defaultValue;
      s = s.def.innerType;
    } else if (s.def.type === 'pipe' && s.def.in && ['default', 'optional'].includes(s.def.in.def.type)) {
      s = s.def.in;
    } else {
      field.accepts = accepts(s);
      break;
    }
  }
  return field;
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

function defaultCell(key: ConfigKey, field: Field): string {
  const computed = computedDefaults[key];
  if (computed) return computed;
  if (field.hasDefault) {
    const v = field.defaultValue;
    if (v === '' || (Array.isArray(v) && v.length === 0)) return 'empty';
    const shown = code(Array.isArray(v) ? v.join(',') : v);
    // Byte counts read better in MiB beside the number one sets.
    if (key.endsWith('_BYTES') && typeof v === 'number' && v >= 2 ** 20 && v % 2 ** 20 === 0) return `${shown} (${v / 2 ** 20} MiB)`;
    if (key.endsWith('_BYTES') && typeof v === 'number' && v >= 1024 && v % 1024 === 0) return `${shown} (${v / 1024} KiB)`;
    return shown;
  }
  return field.optional ? 'unset' : '**required**';
}

function descriptionCell(key: ConfigKey, schema: SchemaView, field: Field): string {
  const text = schema.description;
  if (!text) throw new Error(`${key} has no .describe() in lib/config.ts`);
  return field.accepts ? `${text} Accepts ${field.accepts}.` : text;
}

const HEADER = `# Configuration

<!-- Generated from lib/config.ts by tools/config-doc.ts: run \`npm run docs:config\`, do not edit by hand. -->

Each process (the API, the control worker, the engine worker, setup) parses its environment once
with a zod schema (\`lib/config.ts\`) and stops at start naming any variable that is malformed or
missing. Locally \`npm start\` and \`npm test\` set what they need: the secrets come from
\`~/.cache/kiln/local-secrets.env\`, generated once per user, and the engine worker gets only
\`.data/engine.env\` ([security.md](security.md)). In production the systemd units read
\`/etc/kiln/kiln.env\` ([production.md](production.md)).
`;

const FOOTER = `## Ports and files

Ports: API 8080 (tests: 8081, or 8081 + 10 × \`KILN_TEST_SLOT\`; benchmarks: 8070), Temporal 7233
(the full server: 7243), Temporal UI 8233 (the full server's: 8243), MinIO 9000, Postgres 5432,
worker metrics 9464 (control) and 9465 (engine). The test suite's own Temporal dev server, its UI
and its Postgres cluster: 17233, 18233 and 15432, + \`KILN_TEST_SLOT\` (its further lanes: \`KILN_TEST_LANES\`).

Runtime data lives in \`.data/\` (git-ignored): logs in \`.data/logs/\`, the API token in
\`.data/api-token\`, the Temporal SQLite file, MinIO's data, the engine's model cache. The binaries
built from Go modules live in the per-user cache (\`KILN_CACHE\`), keyed by version, so fresh clones
and CI reuse them.
`;

/** The page, as \`npm run docs:config\` writes it. */
export function renderConfigDoc(): string {
  const shape = configSchema.shape as unknown as Record<ConfigKey, SchemaView>;
  const keys = Object.keys(shape) as ConfigKey[];
  const parts = [HEADER];
  for (const group of configGroupOrder) {
    const rows = keys
      .filter((key) => configGroups[key] === group.name)
      .map((key) => {
        const field = fieldOf(shape[key]);
        return `| \`${key}\` | ${cell(defaultCell(key, field))} | ${cell(descriptionCell(key, shape[key], field))} |`;
      });
    if (rows.length === 0) continue;
    parts.push(`## ${group.name}\n\n${group.intro}\n\n| Variable | Default | Description |\n|---|---|---|\n${rows.join('\n')}\n`);
  }
  const scriptRows = scriptVariables.map(
    (v) =>
      `| ${v.names.map((n) => `\`${n}\``).join(', ')} | ${cell(v.default)} | ${cell(v.description)} Read by ${v.readBy.map((f) => `\`${f}\``).join(', ')}. |`,
  );
  parts.push(
    `## Variables the scripts read\n\nRead by \`npm start\`, \`npm test\`, \`npm run bench\`, setup and the CLI (\`infra/\`, \`bench/\`, \`cli/\`), not by the processes' schema above.\n\n| Variable | Default | Description |\n|---|---|---|\n${scriptRows.join('\n')}\n`,
  );
  parts.push(FOOTER);
  return parts.join('\n');
}

/** The page in the tree, or undefined where there is none yet. */
export function readConfigDoc(file = CONFIG_DOC_PATH): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

if (require.main === module) {
  writeFileSync(CONFIG_DOC_PATH, renderConfigDoc());
  console.log(`wrote ${path.relative(process.cwd(), CONFIG_DOC_PATH)}`);
}
