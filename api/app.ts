/** The HTTP API as an express app; `api/index.ts` listens, tests may mount it directly. */
import type { Client } from '@temporalio/client';
import { sql } from 'drizzle-orm';
import path from 'node:path';
import express, { type Request } from 'express';
import type { Db } from '../db/client';
import type { Logger } from '../lib/logger';
import type { SecretBox } from '../lib/secret-box';
import type { UrlSigner } from '../lib/signing';
import type { Storage } from '../lib/storage';
import { requireAuth } from './auth';
import { openApiDocument, REFERENCE_HTML } from './openapi';
import { httpRequests, registry } from '../lib/metrics';
import { errorHandler, notFoundHandler } from './errors';
import { requestLog } from './request-log';
import type { EventHub } from './event-hub';
import type { UrlContext } from './prediction-json';
import { accountRoutes } from './routes/account';
import { batchRoutes } from './routes/batches';
import { deploymentRoutes } from './routes/deployments';
import { fileContentRoute, fileRoutes } from './routes/files';
import { modelRoutes } from './routes/models';
import { openaiRoutes } from './routes/openai';
import { predictionRoutes } from './routes/predictions';
import { streamRoutes } from './routes/streams';
import { webhookRoutes } from './routes/webhooks';

export interface AppDeps {
  db: Db;
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
  publicUrl?: string;
  /** Where the playground links each run: the Temporal UI and the namespace predictions run in. */
  temporalUi?: { url: string; namespace: string };
  /** How the API fetches a batch's `input_url`. */
  fetch?: { allowPrivate: boolean; maxBytes: number; timeoutMs: number };
  batches?: { parallelism: number; chunksPerRun: number };
}

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', 'loopback');
  const urls = (req: Request): UrlContext => ({
    baseUrl: deps.publicUrl?.replace(/\/$/, '') ?? `${req.protocol}://${req.get('host')}`,
    signer: deps.signer,
  });

  app.use(requestLog(deps.logger));
  app.use((req, res, next) => {
    const end = httpRequests.startTimer({ method: req.method });
    // The route pattern, not the path: ids would make a metric per prediction.
    res.on('finish', () => end({ route: req.route?.path ? `${req.baseUrl}${req.route.path}` : 'unmatched', status: res.statusCode }));
    next();
  });
  app.get('/metrics', async (_req, res) => {
    res.type(registry.contentType).send(await registry.metrics());
  });

  app.get('/openapi.json', (req, res) => {
    res.json(openApiDocument(urls(req).baseUrl));
  });
  app.get('/docs', (_req, res) => {
    res.type('html').send(REFERENCE_HTML);
  });

  // The playground is static files over the public API; the page asks for a token itself.
  app.get('/playground/config.json', (_req, res) => {
    res.json({
      temporal_ui_url: (deps.temporalUi?.url ?? 'http://127.0.0.1:8233').replace(/\/$/, ''),
      temporal_namespace: deps.temporalUi?.namespace ?? 'default',
    });
  });
  const playground = path.join(__dirname, 'playground');
  app.use('/playground', express.static(playground, { index: false, fallthrough: true }));
  app.get('/', (_req, res) => {
    res.sendFile(path.join(playground, 'index.html'));
  });

  app.get('/healthz', async (_req, res) => {
    await deps.db.execute(sql`select 1`);
    res.json({ status: 'ok' });
  });

  // Streams authenticate by their signed URL, so they sit outside the token check.
  app.use(streamRoutes({ db: deps.db, hub: deps.hub, signer: deps.signer, baseUrl: (req) => urls(req).baseUrl }));
  const files = {
    db: deps.db,
    storage: deps.storage,
    signer: deps.signer,
    baseUrl: (req: Request) => urls(req).baseUrl,
    maxUploadBytes: deps.maxUploadBytes ?? 100 * 2 ** 20,
  };
  app.use(fileContentRoute(files));

  const v1 = express.Router();
  v1.use(express.json({ limit: '10mb' }));
  v1.use(requireAuth(deps.db));
  v1.use(
    predictionRoutes({
      db: deps.db,
      temporal: deps.temporal,
      hub: deps.hub,
      controlQueue: deps.controlQueue,
      allowPrivateWebhooks: deps.allowPrivateWebhooks,
      urls,
    }),
  );
  v1.use(accountRoutes({ db: deps.db }));
  v1.use(fileRoutes(files));
  v1.use(modelRoutes({ db: deps.db, storage: deps.storage, baseUrl: (req) => urls(req).baseUrl, maxBlobBytes: deps.maxBlobBytes ?? 2 ** 40 }));
  v1.use(
    deploymentRoutes({
      db: deps.db,
      temporal: deps.temporal,
      hub: deps.hub,
      controlQueue: deps.controlQueue,
      allowPrivateWebhooks: deps.allowPrivateWebhooks,
      urls,
    }),
  );
  v1.use(
    batchRoutes({
      db: deps.db,
      temporal: deps.temporal,
      storage: deps.storage,
      controlQueue: deps.controlQueue,
      fetch: { storage: deps.storage, signer: deps.signer, ...(deps.fetch ?? { allowPrivate: false, maxBytes: 50 * 2 ** 20, timeoutMs: 30_000 }) },
      parallelism: deps.batches?.parallelism ?? 2,
      chunksPerRun: deps.batches?.chunksPerRun ?? 500,
      urls,
    }),
  );
  v1.use(webhookRoutes({ db: deps.db, secrets: deps.secrets, temporal: deps.temporal, controlQueue: deps.controlQueue }));
  app.use('/v1', v1);

  app.use(
    '/openai/v1',
    openaiRoutes({
      db: deps.db,
      temporal: deps.temporal,
      controlQueue: deps.controlQueue,
      allowPrivateWebhooks: deps.allowPrivateWebhooks,
      hub: deps.hub,
      logger: deps.logger,
    }),
  );

  app.use(notFoundHandler);
  app.use(errorHandler(deps.logger));
  return app;
}
