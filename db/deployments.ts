import { and, eq, ne, sql } from 'drizzle-orm';
import { newId } from '../lib/ids';
import { KilnError } from '../lib/kiln-error';
import type { Db } from './client';
import type { Tx } from './events';
import { accounts, deployments } from './schema';

export type Deployment = typeof deployments.$inferSelect;

export async function createDeployment(db: Db | Tx, d: Omit<typeof deployments.$inferInsert, 'id'>): Promise<Deployment> {
  const [row] = await db
    .insert(deployments)
    .values({ id: `dep_${newId()}`, ...d })
    .returning();
  return row;
}

export async function getDeployment(db: Db, owner: string, name: string): Promise<Deployment | undefined> {
  return db.query.deployments.findFirst({ where: and(eq(deployments.owner, owner), eq(deployments.name, name)) });
}

export async function listDeployments(db: Db, ownerId: string): Promise<Deployment[]> {
  return db.select().from(deployments).where(eq(deployments.ownerId, ownerId)).orderBy(deployments.name);
}

/** A new release: the version or the scaling changed. */
export async function updateDeployment(
  db: Db | Tx,
  id: string,
  changes: Partial<Pick<Deployment, 'versionId' | 'hardware' | 'minInstances' | 'maxInstances'>>,
): Promise<Deployment> {
  const [row] = await db
    .update(deployments)
    .set({ ...changes, release: sql`${deployments.release} + 1`, updatedAt: sql`now()` })
    .where(eq(deployments.id, id))
    .returning();
  return row;
}

/** A deployment's min_instances would take the account past its quota of pinned replicas. */
export class PinnedQuotaExceeded extends KilnError {
  constructor(
    readonly pinned: number,
    readonly quota: number,
  ) {
    super(`${pinned} pinned replicas; the quota is ${quota}`);
  }
}

/**
 * Writes a deployment (`write`) only if the account's deployments then pin no more replicas
 * (the sum of their min_instances) than its max_pinned_replicas. The account's row is locked
 * meanwhile, so two changes at once never both fit a quota that holds only one.
 */
export async function withinPinnedQuota<T>(
  db: Db,
  change: { accountId: string; minInstances: number; deploymentId?: string },
  write: (tx: Tx) => Promise<T>,
): Promise<T> {
  return db.transaction(async (tx) => {
    const [account] = await tx
      .select({ quota: accounts.maxPinnedReplicas })
      .from(accounts)
      .where(eq(accounts.id, change.accountId))
      .for('update');
    const [others] = await tx
      .select({ pinned: sql<number>`coalesce(sum(${deployments.minInstances}), 0)::int` })
      .from(deployments)
      .where(and(eq(deployments.ownerId, change.accountId), change.deploymentId ? ne(deployments.id, change.deploymentId) : undefined));
    const pinned = others.pinned + change.minInstances;
    // Lowering min_instances is always allowed, even for an account already over a lowered quota.
    if (change.minInstances > 0 && pinned > account.quota) throw new PinnedQuotaExceeded(pinned, account.quota);
    return write(tx);
  });
}

export interface ReplicaLimits {
  /** Replicas kept loaded at all times (the largest min_instances of the version's deployments). */
  min: number;
  /** The most replicas the version may have (the largest max_instances of its deployments). */
  max: number;
  /** Accounts whose deployments pin the version (min_instances above zero). */
  pinnedBy: string[];
}

/**
 * Replica bounds of the versions that deployments name. A version called both through a
 * deployment and directly shares one queue and one set of replicas, so the deployment's bounds
 * are the version's; with two deployments of one version, the more generous one wins.
 */
export async function replicaLimits(db: Db): Promise<Map<string, ReplicaLimits>> {
  const rows = await db
    .select({
      versionId: deployments.versionId,
      min: sql<number>`max(${deployments.minInstances})::int`,
      max: sql<number>`max(${deployments.maxInstances})::int`,
      pinnedBy: sql<
        string[]
      >`coalesce(array_agg(distinct ${deployments.ownerId} order by ${deployments.ownerId}) filter (where ${deployments.minInstances} > 0), '{}')`,
    })
    .from(deployments)
    .groupBy(deployments.versionId);
  return new Map(rows.map((r) => [r.versionId, { min: r.min, max: r.max, pinnedBy: r.pinnedBy }]));
}
