import { eq, gt, sql } from 'drizzle-orm';
import type { EngineRole, NodeLoad } from '../domain/prefill-split';
import { type LoadedVersion } from '../domain/statuses';
import { builtOnce, type Db } from './client';
import { nodes } from './schema';

export type NodeRow = typeof nodes.$inferSelect;

/** A node whose heartbeat is older than this is treated as gone. */
export const NODE_TTL_MS = 15_000;

export async function registerNode(db: Db, n: { id: string; memoryBytes: number; gpu: string | null; role?: EngineRole }): Promise<void> {
  const role = n.role ?? 'both';
  await db
    .insert(nodes)
    .values({ ...n, role, loaded: [] })
    .onConflictDoUpdate({
      target: nodes.id,
      set: { memoryBytes: n.memoryBytes, gpu: n.gpu, role, loaded: [], load: null, heartbeatAt: sql`now()`, startedAt: sql`now()` },
    });
}

export async function heartbeatNode(db: Db, id: string, loaded: LoadedVersion[], load?: NodeLoad): Promise<void> {
  await db
    .update(nodes)
    .set({ loaded, ...(load ? { load } : {}), heartbeatAt: sql`now()` })
    .where(eq(nodes.id, id));
}

export async function removeNode(db: Db, id: string): Promise<void> {
  await db.delete(nodes).where(eq(nodes.id, id));
}

// Every create reads the nodes (to know whether its version is warm): built once.
const live = builtOnce((db) =>
  db
    .select()
    .from(nodes)
    .where(gt(nodes.heartbeatAt, sql`now() - ${`${NODE_TTL_MS} milliseconds`}::interval`))
    .prepare('live_nodes'),
);

/**
 * How old a create's read of the nodes may be (api/create-prediction.ts): a node that stops
 * serving a version keeps polling its queue at least this much longer, so a prediction sent
 * there on such a read still finds a worker.
 */
export const CREATE_NODES_MAX_AGE_MS = 1_000;

export async function liveNodes(db: Db): Promise<NodeRow[]> {
  return live(db).execute();
}

/**
 * `liveNodes` read at most `maxAgeMs` ago, one read at a time: what a node has loaded changes
 * with its heartbeat (seconds apart), so a create need not read it again each time. A read that
 * failed is not kept.
 */
export function recentLiveNodes(maxAgeMs: number): (db: Db) => Promise<NodeRow[]> {
  let last: { at: number; nodes: Promise<NodeRow[]> } | undefined;
  return (db) => {
    const now = performance.now();
    if (!last || now - last.at > maxAgeMs) {
      const read = { at: now, nodes: liveNodes(db) };
      read.nodes.catch(() => {
        if (last === read) last = undefined;
      });
      last = read;
    }
    return last.nodes;
  };
}
