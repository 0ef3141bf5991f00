/** A `version` field as predictions and batches take it: a version id, `owner/name` or `owner/name:version`. */
import type { Db } from '../db/client';
import { type ResolvedVersion, resolveModelVersion, resolveVersionId } from '../db/models';
import { ValidationError } from './errors';

const MODEL_REF = /^([a-zA-Z0-9][\w.-]*)\/([a-zA-Z0-9][\w.-]*)(?::([a-f0-9]{64}))?$/;
const VERSION_ID = /^[a-f0-9]{64}$/;

/** The version the account may use, or a 422 naming `field`. */
export async function resolveVersionRef(db: Db, accountId: string, version: string, field = 'version'): Promise<ResolvedVersion> {
  let resolved: ResolvedVersion | undefined;
  const ref = MODEL_REF.exec(version);
  if (ref) resolved = await resolveModelVersion(db, accountId, { owner: ref[1], name: ref[2], versionId: ref[3] });
  else if (VERSION_ID.test(version)) resolved = await resolveVersionId(db, accountId, version);
  if (!resolved) throw new ValidationError([{ field, description: `no model version ${version} that you can use` }]);
  return resolved;
}
