/**
 * The engine's own Postgres role. Engine nodes parse untrusted model files, so they connect as
 * `kiln_engine`, which may touch only what an engine writes or reads: the node registry, the
 * versions it loads, deployments' replica bounds and owners, stream events and output file rows,
 * and on the hot path a prediction's transition (status, output, logs, times, revision), its
 * admission slot and its usage row. Accounts, API tokens, webhook secrets, predictions' inputs
 * and outputs and everyone's usage stay out of its reach: it may write those columns, not read them.
 *
 * Roles are cluster-wide and grants per database: setup runs this for each database it prepares
 * (kiln, kiln_test_N), revoking whatever the role had before, so the grants below are the whole
 * truth after every run.
 */
import postgres from 'postgres';

export const ENGINE_ROLE = 'kiln_engine';

/** What the engine may do, table by table. Kept in step with activities/engine.ts and workers/engine-node.ts. */
const ENGINE_GRANTS = [
  'GRANT SELECT ON model_versions TO kiln_engine',
  'GRANT SELECT, INSERT, UPDATE, DELETE ON nodes TO kiln_engine',
  // owner_id: which account pins a version, so a node holds no more than its share of one account's pinned replicas.
  'GRANT SELECT (version_id, min_instances, max_instances, owner_id) ON deployments TO kiln_engine',
  // Ids, event names and attempts, never `data`: RETURNING id, which attempt writes the stream now
  // (a failed attempt's late write is refused; a reset goes first where needed), whether a write landed.
  // kiln_append_output and kiln_append_first_output (migration 0012) and kiln_finish_prediction (0013) run with the caller's rights: these grants are all they use.
  'GRANT INSERT, SELECT (id, prediction_id, event, attempt) ON prediction_events TO kiln_engine',
  'GRANT USAGE ON SEQUENCE prediction_events_id_seq TO kiln_engine',
  'GRANT INSERT ON files TO kiln_engine',
  // The hot path (PredictRequest.project): the engine writes `processing` and the final row itself. It reads
  // only the revision and the run that wrote last (older writes never win), the logs so far (to stream only the new lines) and the retries (usage is metered per retry), and
  // updates only a transition's columns; rows are inserted by the API.
  'GRANT SELECT (id, logs, revision, run_id, retries), UPDATE (output, logs, error, status, metrics, started_at, completed_at, revision, run_id) ON predictions TO kiln_engine',
  // ... and in the same transaction releases the prediction's admission slot and records its usage once.
  'GRANT SELECT (prediction_id), DELETE ON admissions TO kiln_engine',
  'GRANT INSERT ON usage_records TO kiln_engine',
  // A Responses chain's first turn records the node it ran on as its session's (PredictRequest.opensSession).
  'GRANT SELECT (account_id, version_id, session), INSERT, UPDATE (node_id, used_at) ON session_affinities TO kiln_engine',
];

const literal = (s: string) => `'${s.replace(/'/g, "''")}'`;
const identifier = (s: string) => `"${s.replace(/"/g, '""')}"`;

/** Creates or updates the role (cluster-wide); run against the server's `postgres` database. */
export async function ensureEngineRole(adminUrl: string, password: string): Promise<void> {
  const sql = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    await sql.begin(async (tx) => {
      // Checkouts run setup at once against one server: one of them at a time changes the role.
      await tx`select pg_advisory_xact_lock(hashtext('kiln engine role'))`;
      const [exists] = await tx`select 1 from pg_roles where rolname = ${ENGINE_ROLE}`;
      if (!exists) await tx.unsafe(`CREATE ROLE ${ENGINE_ROLE}`);
      await tx.unsafe(
        `ALTER ROLE ${ENGINE_ROLE} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT PASSWORD ${literal(password)}`,
      );
    });
  } finally {
    await sql.end();
  }
}

/** Grants the role exactly ENGINE_GRANTS in the database at `url` (after its migrations). */
export async function grantEngineRole(url: string): Promise<void> {
  const database = new URL(url).pathname.slice(1);
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(hashtext('kiln engine grants'))`;
      await tx.unsafe(`REVOKE ALL ON ALL TABLES IN SCHEMA public FROM ${ENGINE_ROLE}`);
      await tx.unsafe(`REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM ${ENGINE_ROLE}`);
      await tx.unsafe(`GRANT CONNECT ON DATABASE ${identifier(database)} TO ${ENGINE_ROLE}`);
      await tx.unsafe(`GRANT USAGE ON SCHEMA public TO ${ENGINE_ROLE}`);
      for (const grant of ENGINE_GRANTS) await tx.unsafe(grant);
    });
  } finally {
    await sql.end();
  }
}

/** The engine's connection string: the same server and database as `url`, as the engine's role. */
export function engineDatabaseUrl(url: string, password: string): string {
  const u = new URL(url);
  u.username = ENGINE_ROLE;
  u.password = encodeURIComponent(password);
  return u.toString();
}
