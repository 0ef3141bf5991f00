/** The HTTP API as an express app; `api/index.ts` listens, tests may mount it directly. */
import type { Client } from '@temporalio/client';
import { sql } from 'drizzle-orm';
import express, { type Request } from 'express';
import type { Db } from '../db/client';
import type { Logger } from '../lib/logger';
import { requireAuth } from './auth';
import { errorHandler, notFoundHandler } from './errors';
import { predictionRoutes } from './routes/predictions';

export interface AppDeps {
  db: Db;
  temporal: Client;
  logger: Logger;
  controlQueue: string;
  publicUrl?: string;
}

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', 'loopback');
  const baseUrl = (req: Request) => deps.publicUrl?.replace(/\/$/, '') ?? `${req.protocol}://${req.get('host')}`;

  app.get('/healthz', async (_req, res) => {
    await deps.db.execute(sql`select 1`);
    res.json({ status: 'ok' });
  });

  const v1 = express.Router();
  v1.use(express.json({ limit: '10mb' }));
  v1.use(requireAuth(deps.db));
  v1.use(predictionRoutes({ db: deps.db, temporal: deps.temporal, controlQueue: deps.controlQueue, baseUrl }));
  app.use('/v1', v1);

  app.use(notFoundHandler);
  app.use(errorHandler(deps.logger));
  return app;
}
