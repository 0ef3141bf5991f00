/** Entry point of an API process. Stateless: run as many as you like behind a balancer. */
import { Client, Connection } from '@temporalio/client';
import { closeDb, createDb, listenClient } from '../db/client';
import { enableFixtureTasks } from '../fixtures/enable';
import { config } from '../lib/config';
import { createLogger } from '../lib/logger';
import { payloadRefCodec } from '../lib/payload-refs';
import { surviveRestartsOfPostgres } from '../lib/postgres-socket-race';
import { announceReady } from '../lib/ready';
import { secretBoxFromConfig } from '../lib/secret-box';
import { urlSignerFromConfig } from '../lib/signing';
import { Storage } from '../lib/storage';
import { startTracing } from '../lib/tracing';
import { createApp } from './app';
import { appSettingsOf } from './app-settings';
import { answerClientErrors } from './client-errors';
import { EventHub } from './event-hub';

async function main() {
  const c = config();
  if (c.KILN_ENABLE_FIXTURES) enableFixtureTasks();
  const logger = createLogger('api', c.LOG_LEVEL);
  surviveRestartsOfPostgres(logger);
  const db = createDb(c.DATABASE_URL);
  const streamDb = createDb(c.DATABASE_URL, { max: c.KILN_API_STREAM_DB_CONNECTIONS });
  const tracing = startTracing('kiln-api', c.OTEL_EXPORTER_OTLP_ENDPOINT);
  const storage = Storage.fromConfig(c);
  const connection = await Connection.connect({ address: c.TEMPORAL_ADDRESS });
  // Payloads over KILN_PAYLOAD_INLINE_MAX_BYTES go by reference; the codec server resolves them for the UI.
  const codec = payloadRefCodec(storage, c);
  const temporal = new Client({
    connection,
    namespace: c.TEMPORAL_NAMESPACE,
    dataConverter: { payloadCodecs: [codec] },
    plugins: tracing ? [tracing.plugin] : [],
  });
  const hub = new EventHub(db.$client, logger, () => listenClient(c.DATABASE_URL));
  await hub.start();
  const app = createApp({
    db,
    streamDb,
    temporal,
    logger,
    hub,
    signer: urlSignerFromConfig(c, ['stream', 'file', 'ref']),
    secrets: secretBoxFromConfig(c),
    storage,
    codecServer: { codec, operatorToken: c.KILN_OPERATOR_TOKEN, corsOrigins: c.KILN_CODEC_CORS_ORIGINS },
    ...appSettingsOf(c),
  });
  // Express 5 calls this with the error when listening fails (the port is taken): exit, so that
  // the supervisor sees it and npm start says so, instead of a process that serves nothing.
  const server = app.listen(c.PORT, c.HOST, (err?: Error) => {
    if (err) {
      logger.fatal({ err }, `cannot listen on ${c.HOST}:${c.PORT}`);
      process.exit(1);
    }
    logger.info({ url: `http://${c.HOST}:${c.PORT}` }, 'api listening');
    announceReady();
  });
  answerClientErrors(server);
  const stop = () => {
    // Open streams would hold the server up: give them a moment, then close them.
    setTimeout(() => server.closeAllConnections(), 3_000).unref();
    server.close(async () => {
      await hub.stop();
      await connection.close();
      await closeDb(db);
      await closeDb(streamDb);
      await tracing?.shutdown();
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
