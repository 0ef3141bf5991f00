/** The models OpenAI's clients can call: the account's visible text-generation and embeddings models. */
import { and, asc, inArray } from 'drizzle-orm';
import type { Account } from '../../db/accounts';
import type { Db } from '../../db/client';
import { visibleTo } from '../../db/models';
import { models } from '../../db/schema';
import type { ModelList } from './protocol';
import { unixSeconds } from './result';

type ModelRow = Pick<typeof models.$inferSelect, 'owner' | 'name' | 'createdAt' | 'latestVersionId'>;

/** A model without a version yet cannot run, so it is left out. */
export function modelList(rows: ModelRow[]): ModelList {
  return {
    object: 'list',
    data: rows
      .filter((m) => m.latestVersionId)
      .map((m) => ({ id: `${m.owner}/${m.name}`, object: 'model', created: unixSeconds(m.createdAt), owned_by: m.owner })),
  };
}

export async function listModels(db: Db, account: Account): Promise<ModelList> {
  const rows = await db
    .select()
    .from(models)
    .where(and(visibleTo(account.id), inArray(models.task, ['text-generation', 'embeddings'])))
    .orderBy(asc(models.owner), asc(models.name));
  return modelList(rows);
}
