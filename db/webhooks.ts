import { randomBytes } from 'node:crypto';
import { and, asc, desc, eq, gt, isNotNull, isNull, or, sql } from 'drizzle-orm';
import { newId } from '../lib/ids';
import type { SecretBox } from '../lib/secret-box';
import type { Db } from './client';
import { webhookDeliveries, webhookSecrets } from './schema';

export type WebhookDeliveryRow = typeof webhookDeliveries.$inferSelect;

/** How long the previous secret keeps signing after a rotation, so receivers can switch over. */
export const ROTATION_OVERLAP_MS = 24 * 3600 * 1000;

/** The current secret and the one it replaced. */
export const MAX_SIGNING_SECRETS = 2;

const newKey = () => `whsec_${randomBytes(32).toString('base64')}`;

/** The account's current secret, made on first use. Stored sealed (lib/secret-box.ts). */
export async function currentWebhookSecret(db: Db, box: SecretBox, accountId: string): Promise<string> {
  return db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`webhook-secret:${accountId}`}))`);
    const [row] = await tx
      .select()
      .from(webhookSecrets)
      .where(and(eq(webhookSecrets.accountId, accountId), isNull(webhookSecrets.expiresAt)))
      .orderBy(desc(webhookSecrets.createdAt))
      .limit(1);
    if (row) return box.open(row.key);
    const key = newKey();
    await tx.insert(webhookSecrets).values({ id: `whs_${newId()}`, accountId, key: box.seal(key) });
    return key;
  });
}

/**
 * A new current secret; the one it replaces keeps signing for the overlap. Only that one: a
 * rotation ends the overlap of any earlier secret and deletes the expired ones, so at most two
 * secrets sign (each adds a signature to every delivery's header).
 */
export async function rotateWebhookSecret(db: Db, box: SecretBox, accountId: string): Promise<{ key: string; previousExpiresAt: Date }> {
  await currentWebhookSecret(db, box, accountId);
  const previousExpiresAt = new Date(Date.now() + ROTATION_OVERLAP_MS);
  return db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`webhook-secret:${accountId}`}))`);
    await tx.delete(webhookSecrets).where(and(eq(webhookSecrets.accountId, accountId), isNotNull(webhookSecrets.expiresAt)));
    await tx
      .update(webhookSecrets)
      .set({ expiresAt: previousExpiresAt })
      .where(and(eq(webhookSecrets.accountId, accountId), isNull(webhookSecrets.expiresAt)));
    const key = newKey();
    await tx.insert(webhookSecrets).values({ id: `whs_${newId()}`, accountId, key: box.seal(key) });
    return { key, previousExpiresAt };
  });
}

/**
 * Every secret that signs now: the current one first, then the one it replaced while its overlap
 * lasts. Never more than two, whatever rotations left behind before rotation ended overlaps.
 */
export async function signingSecrets(db: Db, box: SecretBox, accountId: string): Promise<string[]> {
  await currentWebhookSecret(db, box, accountId);
  const rows = await db
    .select({ key: webhookSecrets.key })
    .from(webhookSecrets)
    .where(and(eq(webhookSecrets.accountId, accountId), or(isNull(webhookSecrets.expiresAt), gt(webhookSecrets.expiresAt, sql`now()`))))
    .orderBy(sql`${webhookSecrets.expiresAt} is not null`, desc(webhookSecrets.createdAt))
    .limit(MAX_SIGNING_SECRETS);
  return rows.map((r) => box.open(r.key));
}

/**
 * Seals every stored secret that is plaintext (written before sealing) or sealed under a key
 * other than the box's current one (a rotation). Idempotent; returns how many rows it changed.
 */
export async function resealWebhookSecrets(db: Db, box: SecretBox): Promise<number> {
  const rows = await db.select({ id: webhookSecrets.id, key: webhookSecrets.key }).from(webhookSecrets);
  let changed = 0;
  for (const row of rows.filter((r) => box.needsReseal(r.key))) {
    // Only if nobody changed the row meanwhile (another setup resealing at the same time).
    const updated = await db
      .update(webhookSecrets)
      .set({ key: box.seal(box.open(row.key)) })
      .where(and(eq(webhookSecrets.id, row.id), eq(webhookSecrets.key, row.key)))
      .returning({ id: webhookSecrets.id });
    changed += updated.length;
  }
  return changed;
}

export async function recordDelivery(db: Db, row: typeof webhookDeliveries.$inferInsert): Promise<void> {
  await db.insert(webhookDeliveries).values(row);
}

export async function deliveriesFor(db: Db, predictionId: string): Promise<WebhookDeliveryRow[]> {
  return db.select().from(webhookDeliveries).where(eq(webhookDeliveries.predictionId, predictionId)).orderBy(asc(webhookDeliveries.id));
}
