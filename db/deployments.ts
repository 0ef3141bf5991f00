import { and, eq, sql } from 'drizzle-orm';
import { newId } from '../lib/ids';
import type { Db } from './client';
import { deployments } from './schema';

export type Deployment = typeof deployments.$inferSelect;

export async function createDeployment(db: Db, d: Omit<typeof deployments.$inferInsert, 'id'>): Promise<Deployment> {
  const [row] = await db.insert(deployments).values({ id: `dep_${newId()}`, ...d }).returning();
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
  db: Db,
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

export interface ReplicaLimits {
  /** Replicas kept loaded at all times (the largest min_instances of the version's deployments). */
  min: number;
  /** The most replicas the version may have (the largest max_instances of its deployments). */
  max: number;
}

/**
 * Replica bounds of the versions that deployments name. A version called both through a
 * deployment and directly shares one queue and one set of replicas, so the deployment's bounds
 * are the version's; with two deployments of one version, the more generous one wins.
 */
export async function replicaLimits(db: Db): Promise<Map<string, ReplicaLimits>> {
  const rows = await db
    .select({ versionId: deployments.versionId, min: sql<number>`max(${deployments.minInstances})::int`, max: sql<number>`max(${deployments.maxInstances})::int` })
    .from(deployments)
    .groupBy(deployments.versionId);
  return new Map(rows.map((r) => [r.versionId, { min: r.min, max: r.max }]));
}
