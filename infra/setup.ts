/**
 * Brings the data side to the state this code expects: database and migrations, the engine's
 * database role and grants, stored secrets sealed under the current key, bucket, the engine's
 * credentials (engine.env), Temporal namespace and search attributes, example models, and the
 * local API token.
 * Idempotent: running it again changes nothing that is already right.
 */
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import postgres from 'postgres';
import { accountForToken, createAccount, createApiToken } from '../db/accounts';
import { closeDb, createDb, migrateDb } from '../db/client';
import { resealWebhookSecrets } from '../db/webhooks';
import { searchAttributeKeys } from '../domain/search-attributes';
import { ConfigError, config } from '../lib/config';
import { retentionMs } from '../lib/duration';
import { secretBoxFromConfig } from '../lib/secret-box';
import { Storage } from '../lib/storage';
import { engineEnvironment, writeEngineEnv } from './engine-env';
import { engineDatabaseUrl, ensureEngineRole, grantEngineRole } from './engine-role';
import { engineS3Credentials } from './engine-s3';
import { hideEchoFixture, seedEchoFixture, seedRemoveBackground, seedTinyLlama } from './seed';
import { seedTrainedModel, standIn, trainedModels } from './trained-models';

/** The server's own `postgres` database, where databases and roles are made. */
function adminUrl(url: string): string {
  const admin = new URL(url);
  admin.pathname = '/postgres';
  return admin.toString();
}

async function ensureDatabase(url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  const sql = postgres(adminUrl(url), { max: 1, onnotice: () => {} });
  try {
    const rows = await sql`select 1 from pg_database where datname = ${name}`;
    if (rows.length === 0) await sql.unsafe(`create database "${name.replace(/"/g, '""')}"`);
  } finally {
    await sql.end();
  }
}

// The full Temporal server serves a new namespace, and the search attributes just added to one,
// only once its namespace cache has refreshed (every 2 s), so setup waits for both.
const cacheRefreshDeadlineMs = 30_000;
const pause = () => new Promise((resolve) => setTimeout(resolve, 250));

async function missingSearchAttributes(connection: Connection, namespace: string, deadline: number) {
  for (;;) {
    try {
      const existing = await connection.operatorService.listSearchAttributes({ namespace });
      return searchAttributeKeys.filter((k) => !(k.name in (existing.customAttributes ?? {})));
    } catch (err) {
      if (!/not found/i.test((err as Error).message) || Date.now() > deadline) throw err;
    }
    await pause();
  }
}

/** Creates the namespace with the configured retention, or sets it on one that has another. */
async function ensureNamespaceRetention(connection: Connection, namespace: string, retention: string): Promise<void> {
  const retentionTtl = msToTs(retentionMs(retention));
  try {
    await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: retentionTtl });
    return;
  } catch (err) {
    if (!/already exists/i.test((err as Error).message)) throw err;
  }
  const { config: current } = await connection.workflowService.describeNamespace({ namespace });
  const currentMs = Number(current?.workflowExecutionRetentionTtl?.seconds ?? 0) * 1000;
  if (currentMs === retentionMs(retention)) return;
  await connection.workflowService.updateNamespace({ namespace, config: { workflowExecutionRetentionTtl: retentionTtl } });
  console.log(`set the retention of Temporal namespace ${namespace} to ${retention}`);
}

async function ensureNamespace(address: string, namespace: string, retention: string): Promise<void> {
  const connection = await Connection.connect({ address });
  try {
    await ensureNamespaceRetention(connection, namespace, retention);
    const deadline = Date.now() + cacheRefreshDeadlineMs;
    const missing = await missingSearchAttributes(connection, namespace, deadline);
    if (missing.length > 0) {
      await connection.operatorService.addSearchAttributes({
        namespace,
        searchAttributes: Object.fromEntries(missing.map((k) => [k.name, 2 /* INDEXED_VALUE_TYPE_KEYWORD */])),
      });
      // Predictions started before the frontend sees the attributes would be refused.
      while ((await missingSearchAttributes(connection, namespace, deadline)).length > 0) {
        if (Date.now() > deadline) throw new Error(`Temporal does not show the search attributes of ${namespace}`);
        await pause();
      }
    }
  } finally {
    await connection.close();
  }
}

/** Reuses the token in .data/api-token while it is valid; otherwise makes a new one. */
async function ensureLocalToken(db: ReturnType<typeof createDb>, accountId: string, file: string): Promise<string> {
  if (existsSync(file)) {
    const token = (await readFile(file, 'utf8')).trim();
    const account = await accountForToken(db, token);
    if (account?.id === accountId) return token;
  }
  const { token } = await createApiToken(db, accountId, 'local development');
  await writeFile(file, `${token}\n`, { mode: 0o600 });
  return token;
}

/** Setup needs what only setup (and the API and control worker) may hold. */
function required<T>(value: T | undefined, name: string): T {
  if (value === undefined) throw new ConfigError(`invalid configuration:\n  ${name}: required by setup`);
  return value;
}

async function main() {
  const c = config();
  const signingRoot = required(c.KILN_URL_SIGNING_KEY, 'KILN_URL_SIGNING_KEY');
  const enginePassword = required(c.KILN_ENGINE_DB_PASSWORD, 'KILN_ENGINE_DB_PASSWORD');
  const secrets = secretBoxFromConfig(c);
  await ensureDatabase(c.DATABASE_URL);
  const db = createDb(c.DATABASE_URL, { max: 2 });
  try {
    await migrateDb(db);
    await ensureEngineRole(adminUrl(c.DATABASE_URL), enginePassword);
    await grantEngineRole(c.DATABASE_URL);
    const resealed = await resealWebhookSecrets(db, secrets);
    if (resealed > 0) console.log(`sealed ${resealed} stored webhook secret(s) under the current KILN_SECRETS_KEY`);
    const storage = Storage.fromConfig(c);
    await storage.ensureBucket();
    // Best effort: a store without lifecycle rules still works, it just keeps abandoned uploads.
    await storage.expireUnverifiedUploads().catch((err: Error) => console.warn(`uploads/ will not expire by themselves: ${err.message}`));
    const engineEnv = engineEnvironment({
      databaseUrl: engineDatabaseUrl(c.DATABASE_URL, enginePassword),
      s3: await engineS3Credentials(c),
      signingRoot,
    });
    await writeEngineEnv(path.join(c.KILN_DATA_DIR, 'engine.env'), engineEnv);
    await ensureNamespace(c.TEMPORAL_ADDRESS, c.TEMPORAL_NAMESPACE, c.KILN_TEMPORAL_RETENTION);
    const kiln = await createAccount(db, 'kiln', 'Kiln examples');
    const local = await createAccount(db, 'local', 'Local developer');
    await ensureLocalToken(db, local.id, path.join(c.KILN_DATA_DIR, 'api-token'));
    const version = await seedTinyLlama(db, storage, kiln, c.KILN_DATA_DIR);
    console.log(`seeded kiln/tiny-llama:${version.id}`);
    for (const trained of trainedModels()) {
      const seeded = await seedTrainedModel(db, storage, kiln, trained);
      if (seeded) console.log(`seeded kiln/${trained.name}:${seeded.id} (trained; ${trained.license})`);
      else
        console.log(
          `kiln/${trained.name} not seeded: its file is not in the cache (PyPI unreachable at install?); ${standIn(trained)} stands in`,
        );
    }
    if (c.KILN_OPTIONAL_MODELS.includes('remove-background')) {
      const cutout = await seedRemoveBackground(db, storage, kiln, c.KILN_DATA_DIR);
      console.log(`seeded kiln/remove-background:${cutout.id} (trained; AGPL-3.0, opted in by KILN_OPTIONAL_MODELS)`);
    } else {
      console.log('kiln/remove-background not seeded: its weights are AGPL-3.0; KILN_OPTIONAL_MODELS=remove-background opts in');
    }
    if (c.KILN_ENABLE_FIXTURES) await seedEchoFixture(db, kiln);
    else await hideEchoFixture(db, kiln);
  } finally {
    await closeDb(db);
  }
}

main().catch((err) => {
  console.error(`setup failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
