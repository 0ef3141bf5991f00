/**
 * Empties the configured bucket (S3_BUCKET), so that a test run starts from no objects; setup
 * then uploads the seeds again. Only the test suite calls it, on its own bucket.
 */
import { config } from '../lib/config';
import { Storage } from '../lib/storage';

async function main() {
  const c = config();
  if (c.KILN_ENV !== 'test') throw new Error(`empty-bucket empties test buckets only (KILN_ENV is ${c.KILN_ENV})`);
  const storage = Storage.fromConfig(c);
  await storage.ensureBucket();
  const deleted = await storage.emptyBucket();
  if (deleted > 0) console.log(`emptied ${c.S3_BUCKET}: ${deleted} object(s)`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
