import { and, eq, gt, sql } from 'drizzle-orm';
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

/** Versions that deployments keep warm: engine nodes never scale these to zero. */
export async function pinnedVersions(db: Db): Promise<Set<string>> {
  const rows = await db.select({ versionId: deployments.versionId }).from(deployments).where(gt(deployments.minInstances, 0));
  return new Set(rows.map((r) => r.versionId));
}
