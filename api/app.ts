/** The HTTP API as an express app; `api/index.ts` listens, tests may mount it directly. */
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { sql } from 'drizzle-orm';
import express, { type Request } from 'express';
import type { Db } from '../db/client';
import type { FetchInputDeps } from '../lib/fetch-input';
import type { Logger } from '../lib/logger';
import { httpRequests, registry } from '../lib/metrics';
import type { SecretBox } from '../lib/secret-box';
import type { UrlSigner } from '../lib/signing';
import type { Storage } from '../lib/storage';
import { DEFAULT_TEMPORAL_UI_URL } from '../lib/temporal-ui';
import { requireAuth, requireOperatorToken } from './auth';
import { type CodecServerDeps, codecServer } from './codec-server';
import { errorHandler, notFoundHandler } from './errors';
import type { EventHub } from './event-hub';
import { rejectNulOutsideInput } from './nul-guard';
import { type ConnectionLimits, OpenConnections } from './open-connections';
import { openAiErrors } from './openai/errors';
import { openaiRoutes } from './openai/router';
import { openApiDocument } from './openapi';
import { rejectMalformedPath } from './path-guard';
import type { UrlContext } from './prediction-json';
import { REFERENCE_HTML } from './reference-page';
import { requestLog } from './request-log';
import { requestTrace } from './request-trace';
import { accountRoutes } from './routes/account';
import { batchRoutes } from './routes/batches';
import { deploymentRoutes } from './routes/deployments';
import { fileContentRoute, fileRoutes } from './routes/files';
import { modelRoutes } from './routes/models';
import { predictionRoutes } from './routes/predictions';
import { streamRoutes } from './routes/streams';
import { type WebhookRoutesDeps, webhookRoutes } from './routes/webhooks';
import { inlinePageCsp, PLAYGROUND_CSP, pagePolicy, securityHeaders } from './security-headers';
import type { ResourceLimits } from './version-resources';

export interface AppDeps {
  db: Db;
  /**
   * The pool SSE streams read on (KILN_API_STREAM_DB_CONNECTIONS), apart from `db`: many streams
   * opening or catching up at once queue there, not ahead of other requests. Absent: `db`.
   */
  streamDb?: Db;
  temporal: Client;
  logger: Logger;
  hub: EventHub;
  signer: UrlSigner;
  /** Seals and opens the webhook secrets stored in the database. */
  secrets: SecretBox;
  controlQueue: string;
  allowPrivateWebhooks: boolean;
  storage: Storage;
  maxBlobBytes?: number;
  maxUploadBytes?: number;
  /**
   * The base of every absolute URL the API writes (KILN_PUBLIC_URL, else the address it listens
   * on: see lib/public-url.ts). Never the request's Host, which the client chooses.
   */
  publicUrl: string;
  /** The bearer token a metrics scraper sends for `/metrics` (KILN_METRICS_TOKEN); unset: not served. */
  metricsToken?: string;
  /**
   * The Temporal UI (KILN_TEMPORAL_UI_URL) and the namespace predictions run in: set, prediction JSON links
   * each workflow there (urls.temporal_ui) and so does the playground.
   */
  temporalUi?: { url: string; namespace: string };
  /** The namespace predictions run in (the playground's links when no UI URL is set). */
  temporalNamespace?: string;
  /** How the API fetches a batch's `input_url`. */
  fetch?: Omit<FetchInputDeps, 'storage' | 'signer'>;
  batches?: { parallelism: number; chunksPerRun: number; maxInputBytes: number };
  /** Temporal's codec server for the UI and CLI (api/codec-server.ts); absent, not served. */
  codecServer?: CodecServerDeps;
  /** Rotations and redeliveries an account may ask for per minute. */
  webhookLimits?: WebhookRoutesDeps['limits'];
  /** Bounds on what versions and deployments may hold of the engine nodes. */
  resources?: ResourceLimits & { pinnedNodeShare: number; prefillSplitMinTokens?: number };
  /** Each account's caps on open streams and waiting requests, and how often their tokens are checked. */
  connectionLimits?: ConnectionLimits;
}

const DEFAULT_WEBHOOK_LIMITS = { rotationsPerMinute: 5, redeliveriesPerMinute: 10 };
const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = { maxOpenStreams: 32, maxWaitingRequests: 64, recheckMs: 2_000 };

const DEFAULT_RESOURCES: ResourceLimits & { pinnedNodeShare: number; prefillSplitMinTokens?: number } = {
  defaultContextSize: 4096,
  defaultSequences: 4,
  maxContextSize: 32768,
  maxSequences: 16,
  pinnedNodeShare: 0.5,
};

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', 'loopback');
  const baseUrl = deps.publicUrl.replace(/\/$/, '');
  const urls = (_req: Request): UrlContext => ({ baseUrl, signer: deps.signer, temporalUi: deps.temporalUi });
  const docsCsp = inlinePageCsp(REFERENCE_HTML);
  const connections = new OpenConnections(deps.db, deps.connectionLimits ?? DEFAULT_CONNECTION_LIMITS, deps.logger);

  app.use(securityHeaders({ https: baseUrl.startsWith('https:') }));
  app.use(requestLog(deps.logger));
  app.use(requestTrace);
  app.use(rejectMalformedPath);
  app.use((req, res, next) => {
    const end = httpRequests.startTimer({ method: req.method });
    // The route pattern, not the path: ids would make a metric per prediction.
    res.on('finish', () => end({ route: req.route?.path ? `${req.baseUrl}${req.route.path}` : 'unmatched', status: res.statusCode }));
    next();
  });
  // Operators' numbers (every model's traffic), not a tenant's: the scraper's own token, not an API token.
  app.get('/metrics', requireOperatorToken(deps.metricsToken, 'KILN_METRICS_TOKEN'), async (_req, res) => {
    res.type(registry.contentType).send(await registry.metrics());
  });

  app.get('/openapi.json', (req, res) => {
    res.json(openApiDocument(urls(req).baseUrl));
  });
  app.get('/docs', (_req, res) => {
    pagePolicy(res, docsCsp);
    res.type('html').send(REFERENCE_HTML);
  });

  // The playground is static files over the public API; the page asks for a token itself.
  app.get('/playground/config.json', (_req, res) => {
    res.json({
      temporal_ui_url: (deps.temporalUi?.url ?? DEFAULT_TEMPORAL_UI_URL).replace(/\/$/, ''),
      temporal_namespace: deps.temporalUi?.namespace ?? deps.temporalNamespace ?? 'default',
    });
  });
  const playground = path.join(__dirname, 'playground');
  app.use(
    '/playground',
    express.static(playground, { index: false, fallthrough: true, setHeaders: (res) => pagePolicy(res, PLAYGROUND_CSP) }),
  );
  app.get('/', (_req, res) => {
    pagePolicy(res, PLAYGROUND_CSP);
    res.sendFile(path.join(playground, 'index.html'));
  });

  app.get('/healthz', async (_req, res) => {
    await deps.db.execute(sql`select 1`);
    res.json({ status: 'ok' });
  });

  // Operators' own token and the UI's origin, not an API token: outside /v1.
  if (deps.codecServer) app.use(codecServer(deps.codecServer));

  // Streams authenticate by their signed URL, so they sit outside the token check.
  const resources = deps.resources ?? DEFAULT_RESOURCES;
  app.use(
    streamRoutes({
      db: deps.streamDb ?? deps.db,
      hub: deps.hub,
      signer: deps.signer,
      connections,
      baseUrl: (req) => urls(req).baseUrl,
      defaultSequences: resources.defaultSequences,
    }),
  );
  const files = {
    db: deps.db,
    storage: deps.storage,
    signer: deps.signer,
    baseUrl: (req: Request) => urls(req).baseUrl,
    maxUploadBytes: deps.maxUploadBytes ?? 100 * 2 ** 20,
  };
  app.use(fileContentRoute(files));

  const v1 = express.Router();
  // The token first: a client without one cannot make the server parse 10 MB of JSON.
  v1.use(requireAuth(deps.db));
  v1.use(express.json({ limit: '10mb' }));
  v1.use(rejectNulOutsideInput);
  // What creating a prediction needs, by a model or by a deployment.
  const creating = {
    db: deps.db,
    temporal: deps.temporal,
    hub: deps.hub,
    connections,
    controlQueue: deps.controlQueue,
    allowPrivateWebhooks: deps.allowPrivateWebhooks,
    defaultSequences: resources.defaultSequences,
    prefillSplitMinTokens: resources.prefillSplitMinTokens,
    urls,
  };
  v1.use(predictionRoutes(creating));
  v1.use(accountRoutes({ db: deps.db, connections }));
  v1.use(fileRoutes(files));
  v1.use(
    modelRoutes({
      db: deps.db,
      storage: deps.storage,
      baseUrl: (req) => urls(req).baseUrl,
      maxBlobBytes: deps.maxBlobBytes ?? 2 ** 40,
      resources,
    }),
  );
  v1.use(deploymentRoutes({ ...creating, pinnedNodeShare: resources.pinnedNodeShare }));
  v1.use(
    batchRoutes({
      db: deps.db,
      temporal: deps.temporal,
      storage: deps.storage,
      controlQueue: deps.controlQueue,
      fetch: {
        storage: deps.storage,
        signer: deps.signer,
        ...(deps.fetch ?? { allowPrivate: false, maxBytes: 50 * 2 ** 20, timeoutMs: 30_000 }),
      },
      parallelism: deps.batches?.parallelism ?? 2,
      chunksPerRun: deps.batches?.chunksPerRun ?? 500,
      maxInputBytes: deps.batches?.maxInputBytes ?? 50 * 2 ** 20,
      urls,
    }),
  );
  v1.use(
    webhookRoutes({
      db: deps.db,
      secrets: deps.secrets,
      temporal: deps.temporal,
      controlQueue: deps.controlQueue,
      limits: deps.webhookLimits ?? DEFAULT_WEBHOOK_LIMITS,
    }),
  );
  app.use('/v1', v1);

  app.use(
    '/openai/v1',
    openaiRoutes({
      db: deps.db,
      temporal: deps.temporal,
      controlQueue: deps.controlQueue,
      allowPrivateWebhooks: deps.allowPrivateWebhooks,
      defaultSequences: resources.defaultSequences,
      prefillSplitMinTokens: resources.prefillSplitMinTokens,
      hub: deps.hub,
      connections,
      logger: deps.logger,
    }),
  );

  app.use(notFoundHandler);
  // What fails before the OpenAI router sees the request (a malformed path) still answers in its shape.
  app.use('/openai', openAiErrors(deps.logger));
  app.use(errorHandler(deps.logger));
  return app;
}
