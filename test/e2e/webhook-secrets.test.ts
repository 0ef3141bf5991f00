/** Webhook signing secrets are stored sealed (lib/secret-box.ts), and still sign. */
import { eq } from 'drizzle-orm';
import { closeDb, type Db } from '../../db/client';
import { webhookSecrets } from '../../db/schema';
import { resealWebhookSecrets } from '../../db/webhooks';
import { config } from '../../lib/config';
import { newId } from '../../lib/ids';
import { secretBoxFromConfig } from '../../lib/secret-box';
import { api, newAccount, testDb } from '../helpers';

let db: Db;
beforeAll(() => {
  db = testDb();
});
afterAll(() => closeDb(db));

test('webhook secrets are stored sealed, not in plaintext', async () => {
  const { account, token: own } = await newAccount(db, 'sealed');
  const { body } = await api('/v1/webhooks/default/secret', { token: own });
  expect(body.key).toMatch(/^whsec_/);
  await api('/v1/webhooks/default/secret/rotate', { token: own, method: 'POST' });
  const rows = await db.select({ key: webhookSecrets.key }).from(webhookSecrets).where(eq(webhookSecrets.accountId, account.id));
  expect(rows).toHaveLength(2);
  for (const row of rows) {
    expect(row.key).toMatch(/^kiln-sealed:v1:/);
    expect(row.key).not.toContain(body.key.slice('whsec_'.length));
  }
});

test('setup seals secrets written in plaintext before, and they still sign', async () => {
  const { account, token: own } = await newAccount(db, 'legacy');
  const legacy = `whsec_${Buffer.from(newId()).toString('base64')}`;
  await db.insert(webhookSecrets).values({ id: `whs_${newId()}`, accountId: account.id, key: legacy });
  expect(await resealWebhookSecrets(db, secretBoxFromConfig(config()))).toBeGreaterThanOrEqual(1);
  const [row] = await db.select({ key: webhookSecrets.key }).from(webhookSecrets).where(eq(webhookSecrets.accountId, account.id));
  expect(row.key).toMatch(/^kiln-sealed:v1:/);
  expect((await api('/v1/webhooks/default/secret', { token: own })).body.key).toBe(legacy);
  // Running it again changes nothing.
  const again = await db.select({ key: webhookSecrets.key }).from(webhookSecrets).where(eq(webhookSecrets.accountId, account.id));
  await resealWebhookSecrets(db, secretBoxFromConfig(config()));
  expect(await db.select({ key: webhookSecrets.key }).from(webhookSecrets).where(eq(webhookSecrets.accountId, account.id))).toEqual(again);
});
