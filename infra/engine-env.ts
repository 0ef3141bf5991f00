/**
 * What an engine node is handed, and nothing more: its database role, its storage session and the
 * two signing keys it uses. Setup writes it to `<data dir>/engine.env` (owner-only); infra/app.sh
 * starts the engine worker with it, and with none of the local secrets. On other hosts, give the
 * engine these variables the way the platform hands out secrets.
 */
import { rename, writeFile } from 'node:fs/promises';
import { purposeKey } from '../lib/signing';
import type { EngineS3Credentials } from './engine-s3';

export function engineEnvironment(opts: { databaseUrl: string; s3: EngineS3Credentials; signingRoot: string }): Record<string, string> {
  const env: Record<string, string> = {
    DATABASE_URL: opts.databaseUrl,
    S3_ACCESS_KEY_ID: opts.s3.accessKeyId,
    S3_SECRET_ACCESS_KEY: opts.s3.secretAccessKey,
    KILN_FILE_URL_KEY: purposeKey(opts.signingRoot, 'file').toString('hex'),
    KILN_FILE_REF_KEY: purposeKey(opts.signingRoot, 'ref').toString('hex'),
  };
  if (opts.s3.sessionToken) env.S3_SESSION_TOKEN = opts.s3.sessionToken;
  return env;
}

/** Writes `NAME='value'` lines that a shell can source, readable by the owner only. */
export async function writeEngineEnv(file: string, env: Record<string, string>): Promise<void> {
  const lines = Object.entries(env).map(([name, value]) => {
    if (value.includes("'") || value.includes('\n')) throw new Error(`${name} cannot be written to ${file}`);
    return `${name}='${value}'\n`;
  });
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, lines.join(''), { mode: 0o600 });
  await rename(tmp, file);
}
