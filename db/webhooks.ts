import { randomBytes } from 'node:crypto';
import { and, asc, desc, eq, gt, isNull, or, sql } from 'drizzle-orm';
import { newId } from '../lib/ids';
import type { Db } from './client';
import { webhookDeliveries, webhookSecrets } from './schema';

export type WebhookDeliveryRow = typeof webhookDeliveries.$inferSelect;

/** How long the previous secret keeps signing after a rotation, so receivers can switch over. */
export const ROTATION_OVERLAP_MS = 24 * 3600 * 1000;

const newKey = () => `whsec_${randomBytes(32).toString('base64')}`;

/** The account's current secret, made on first use. */
export async function currentWebhookSecret(db: Db, accountId: string): Promise<string> {
  return db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`webhook-secret:${accountId}`}))`);
    const [row] = await tx
      .select()
      .from(webhookSecrets)
      .where(and(eq(webhookSecrets.accountId, accountId), isNull(webhookSecrets.expiresAt)))
      .orderBy(desc(webhookSecrets.createdAt))
      .limit(1);
    if (row) return row.key;
    const key = newKey();
    await tx.insert(webhookSecrets).values({ id: `whs_${newId()}`, accountId, key });
    return key;
  });
}

/** A new current secret; the old one stays valid for the overlap. */
export async function rotateWebhookSecret(db: Db, accountId: string): Promise<{ key: string; previousExpiresAt: Date }> {
  await currentWebhookSecret(db, accountId);
  const previousExpiresAt = new Date(Date.now() + ROTATION_OVERLAP_MS);
  return db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`webhook-secret:${accountId}`}))`);
    await tx
      .update(webhookSecrets)
      .set({ expiresAt: previousExpiresAt })
      .where(and(eq(webhookSecrets.accountId, accountId), isNull(webhookSecrets.expiresAt)));
    const key = newKey();
    await tx.insert(webhookSecrets).values({ id: `whs_${newId()}`, accountId, key });
    return { key, previousExpiresAt };
  });
}

/** Every secret that signs now: the current one first, then those still in their overlap. */
export async function signingSecrets(db: Db, accountId: string): Promise<string[]> {
  await currentWebhookSecret(db, accountId);
  const rows = await db
    .select({ key: webhookSecrets.key })
    .from(webhookSecrets)
    .where(and(eq(webhookSecrets.accountId, accountId), or(isNull(webhookSecrets.expiresAt), gt(webhookSecrets.expiresAt, sql`now()`))))
    .orderBy(sql`${webhookSecrets.expiresAt} is not null`, desc(webhookSecrets.createdAt));
  return rows.map((r) => r.key);
}

export async function recordDelivery(db: Db, row: typeof webhookDeliveries.$inferInsert): Promise<void> {
  await db.insert(webhookDeliveries).values(row);
}

export async function deliveriesFor(db: Db, predictionId: string): Promise<WebhookDeliveryRow[]> {
  return db.select().from(webhookDeliveries).where(eq(webhookDeliveries.predictionId, predictionId)).orderBy(asc(webhookDeliveries.id));
}
