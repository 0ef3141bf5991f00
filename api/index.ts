/** Entry point of an API process. Stateless: run as many as you like behind a balancer. */
import { Client, Connection } from '@temporalio/client';
import { closeDb, createDb } from '../db/client';
import { config } from '../lib/config';
import { createLogger } from '../lib/logger';
import { announceReady } from '../lib/ready';
import { createApp } from './app';

async function main() {
  const c = config();
  const logger = createLogger('api', c.LOG_LEVEL);
  const db = createDb(c.DATABASE_URL);
  const connection = await Connection.connect({ address: c.TEMPORAL_ADDRESS });
  const temporal = new Client({ connection, namespace: c.TEMPORAL_NAMESPACE });
  const app = createApp({ db, temporal, logger, controlQueue: c.KILN_CONTROL_QUEUE, publicUrl: c.KILN_PUBLIC_URL });
  const server = app.listen(c.PORT, c.HOST, () => {
    logger.info({ url: `http://${c.HOST}:${c.PORT}` }, 'api listening');
    announceReady();
  });
  const stop = () => {
    server.close(async () => {
      await connection.close();
      await closeDb(db);
      process.exit(0);
    });
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
