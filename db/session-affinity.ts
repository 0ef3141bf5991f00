import { sql } from 'drizzle-orm';
import type { Db } from './client';
import { sessionAffinities } from './schema';

export interface SessionKey {
  accountId: string;
  /** The x-session-affinity header's value. */
  session: string;
  versionId: string;
}

/**
 * The node a session's request goes to: the one it went to before while that one is still among
 * `candidates` (live, serving the version, not excluded), else `fresh`, remembered from now on.
 * One statement, so the first requests of a new session that arrive together agree on a node.
 */
export async function sessionNode(db: Db, key: SessionKey, candidates: string[], fresh: string): Promise<string> {
  // Qualified by the table's name: in ON CONFLICT DO UPDATE that is the row already there.
  const kept =
    candidates.length > 0
      ? sql`session_affinities.node_id in (${sql.join(
          candidates.map((c) => sql`${c}`),
          sql`, `,
        )})`
      : sql`false`;
  const [row] = await db
    .insert(sessionAffinities)
    .values({ ...key, nodeId: fresh })
    .onConflictDoUpdate({
      target: [sessionAffinities.accountId, sessionAffinities.versionId, sessionAffinities.session],
      set: { nodeId: sql`case when ${kept} then session_affinities.node_id else excluded.node_id end`, usedAt: sql`now()` },
    })
    .returning({ nodeId: sessionAffinities.nodeId });
  return row.nodeId;
}

/** Makes `nodeId` the session's node: where the prediction that opened the session ran. */
export async function recordSessionNode(db: Db, key: SessionKey, nodeId: string): Promise<void> {
  await db
    .insert(sessionAffinities)
    .values({ ...key, nodeId })
    .onConflictDoUpdate({
      target: [sessionAffinities.accountId, sessionAffinities.versionId, sessionAffinities.session],
      set: { nodeId, usedAt: sql`now()` },
    });
}
