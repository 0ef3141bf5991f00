/**
 * `npm run admin -- <command>`: operator commands that talk to the database directly, such as
 * creating accounts. Tokens are printed once and stored only as hashes.
 */
import { Client, Connection } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { Command, InvalidArgumentError } from 'commander';
import { and, asc, eq } from 'drizzle-orm';
import { type ArchivedHistory, archivedHistories } from '../activities/history-archive';
import { type AccountSettings, createAccount, createApiToken, findAccountByUsername, updateAccount } from '../db/accounts';
import { closeDb, createDb } from '../db/client';
import { shareModel } from '../db/models';
import { accounts, models } from '../db/schema';
import { resealWebhookSecrets } from '../db/webhooks';
import { taskNames, taskType } from '../domain/tasks';
import { enableFixtureTasks } from '../fixtures/enable';
import { configSchema } from '../lib/config';
import { kilnDataConverter } from '../lib/payload-refs';
import { secretBoxFromConfig } from '../lib/secret-box';
import { Storage } from '../lib/storage';
import { rebuildProjections } from './rebuild-projections';

// Only the database and Temporal are needed here, so only their variables are required.
const { DATABASE_URL, TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, KILN_ENABLE_FIXTURES } = configSchema
  .pick({ DATABASE_URL: true, TEMPORAL_ADDRESS: true, TEMPORAL_NAMESPACE: true, KILN_ENABLE_FIXTURES: true })
  .parse(process.env);
// Where the API serves the test task types, their limits can be set too.
if (KILN_ENABLE_FIXTURES) enableFixtureTasks();
const db = createDb(DATABASE_URL, { max: 2 });

const positive = (v: string) => {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('expected a positive number');
  return n;
};
const wholeOrZero = (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('expected a whole number, 0 or more');
  return n;
};
/** A limit keyed by anything but a task type would apply to nothing: refused, with the types there are. */
const rateLimit = (v: string, acc: Record<string, number> = {}) => {
  const m = /^([\w-]+)=(\d+)$/.exec(v);
  if (!m) throw new InvalidArgumentError('expected task=requests-per-minute, e.g. text-generation=600');
  if (!taskType(m[1])) {
    throw new InvalidArgumentError(
      `${m[1]} is not a task type (a limit is per task type, not per model); task types: ${taskNames().join(', ')}`,
    );
  }
  return { ...acc, [m[1]]: Number(m[2]) };
};

function settingsFrom(o: Record<string, unknown>): AccountSettings {
  const s: AccountSettings = {};
  if (o.name !== undefined) s.name = o.name as string;
  if (o.weight !== undefined) s.fairnessWeight = o.weight as number;
  if (o.group !== undefined) s.fairnessGroup = (o.group as string) || null;
  if (o.maxRunning !== undefined) s.maxRunning = Math.floor(o.maxRunning as number);
  if (o.maxQueued !== undefined) s.maxQueued = Math.floor(o.maxQueued as number);
  if (o.overCap !== undefined) s.overCap = o.overCap as 'wait' | 'refuse';
  if (o.rateLimit !== undefined) s.rateLimits = o.rateLimit as Record<string, number>;
  if (o.disabled !== undefined) s.disabled = o.disabled as boolean;
  if (o.maxPinnedReplicas !== undefined) s.maxPinnedReplicas = o.maxPinnedReplicas as number;
  if (o.maxQueueSeconds !== undefined) s.maxQueueSeconds = (o.maxQueueSeconds as number) || null;
  if (o.maxOpenStreams !== undefined) s.maxOpenStreams = (o.maxOpenStreams as number) || null;
  if (o.maxWaitingRequests !== undefined) s.maxWaitingRequests = (o.maxWaitingRequests as number) || null;
  return s;
}

function withSettings(cmd: Command): Command {
  return cmd
    .option('--name <name>', 'display name')
    .option('--weight <n>', 'fairness weight: share of the engines under contention', positive)
    .option('--group <group>', 'fairness group: accounts in a group share one fair-queue key ("" for none)')
    .option('--max-running <n>', 'predictions admitted at once', positive)
    .option('--max-queued <n>', 'predictions waiting for admission before 429', positive)
    .option('--over-cap <mode>', 'wait (default) or refuse when max-running is reached')
    .option('--rate-limit <task=n>', 'requests per minute for a task type (repeatable)', rateLimit)
    .option(
      '--max-pinned-replicas <n>',
      "replicas the account's deployments may keep loaded at all times (sum of min_instances)",
      wholeOrZero,
    )
    .option(
      '--max-queue-seconds <n>',
      'default max_queue_seconds of its predictions: not started by then, aborted (0 for no limit)',
      wholeOrZero,
    )
    .option('--max-open-streams <n>', 'SSE streams open at once on one API process (0: KILN_MAX_OPEN_STREAMS)', wholeOrZero)
    .option(
      '--max-waiting-requests <n>',
      'requests held for their prediction at once on one API process (Prefer: wait, OpenAI without stream; 0: KILN_MAX_WAITING_REQUESTS)',
      wholeOrZero,
    );
}

async function mustFind(username: string) {
  const account = await findAccountByUsername(db, username);
  if (!account) throw new Error(`no account named ${username}`);
  return account;
}

const program = new Command('kiln-admin').description('Kiln operator commands');
const accountsCmd = program.command('accounts').description('create, change and list accounts');

withSettings(accountsCmd.command('create <username>').description('create an account and print its first API token')).action(
  async (username: string, o) => {
    if (await findAccountByUsername(db, username)) throw new Error(`account ${username} already exists`);
    const account = await updateAccount(db, (await createAccount(db, username)).id, settingsFrom(o));
    const { token } = await createApiToken(db, account.id, 'created by admin');
    console.log(`account ${account.username} (${account.id})\ntoken ${token}\n(shown once: store it now)`);
  },
);

withSettings(accountsCmd.command('update <username>').description('change limits and fairness'))
  .option('--disabled <bool>', 'true to disable the account', (v) => v === 'true')
  .action(async (username: string, o) => {
    const account = await updateAccount(db, (await mustFind(username)).id, settingsFrom(o));
    console.log(JSON.stringify(account, null, 2));
  });

accountsCmd
  .command('list')
  .description('every account with its limits')
  .action(async () => {
    const rows = await db.select().from(accounts).orderBy(asc(accounts.username));
    console.table(
      rows.map((a) => ({
        username: a.username,
        weight: a.fairnessWeight,
        group: a.fairnessGroup ?? '',
        max_running: a.maxRunning,
        max_queued: a.maxQueued,
        over_cap: a.overCap,
        max_pinned_replicas: a.maxPinnedReplicas,
        max_queue_seconds: a.maxQueueSeconds ?? '',
        max_open_streams: a.maxOpenStreams ?? 'default',
        max_waiting_requests: a.maxWaitingRequests ?? 'default',
        disabled: a.disabled,
      })),
    );
  });

program
  .command('tokens')
  .description('API tokens')
  .command('create <username>')
  .option('--name <name>', 'what the token is for', 'admin')
  .action(async (username: string, o) => {
    const { token } = await createApiToken(db, (await mustFind(username)).id, o.name);
    console.log(`${token}\n(shown once: store it now)`);
  });

program
  .command('share <model>')
  .description('let accounts use a private model (owner/name)')
  .requiredOption('--with <usernames...>', 'accounts to share with')
  .action(async (ref: string, o: { with: string[] }) => {
    const [owner, name] = ref.split('/');
    const model = await db.query.models.findFirst({ where: and(eq(models.owner, owner ?? ''), eq(models.name, name ?? '')) });
    if (!model) throw new Error(`no model ${ref}`);
    const ids = await Promise.all(o.with.map(async (u) => (await mustFind(u)).id));
    const updated = await shareModel(db, model.id, ids);
    console.log(`${ref} is shared with ${updated.allowedAccounts.length} account(s)`);
  });

program
  .command('secrets')
  .description('secrets stored in the database (webhook signing secrets)')
  .command('reseal')
  .description('seal every stored secret under KILN_SECRETS_KEY: plaintext rows, and rows under a key in KILN_SECRETS_PREVIOUS_KEYS')
  .action(async () => {
    const box = secretBoxFromConfig(configSchema.pick({ KILN_SECRETS_KEY: true, KILN_SECRETS_PREVIOUS_KEYS: true }).parse(process.env));
    console.log(`resealed ${await resealWebhookSecrets(db, box)} stored secret(s) under the current key`);
  });

/** The bucket's settings from the environment, or an error naming what is missing and why `command` needs it. */
function bucketSettings(why: string) {
  const parsed = configSchema
    .pick({
      S3_ENDPOINT: true,
      S3_REGION: true,
      S3_FORCE_PATH_STYLE: true,
      S3_ACCESS_KEY_ID: true,
      S3_SECRET_ACCESS_KEY: true,
      S3_SESSION_TOKEN: true,
      S3_BUCKET: true,
      KILN_PAYLOAD_INLINE_MAX_BYTES: true,
      KILN_PAYLOAD_CACHE_MB: true,
    })
    .safeParse(process.env);
  if (!parsed.success) {
    const names = parsed.error.issues.map((i) => i.path.join('.')).join(', ');
    throw new Error(`${why}: set ${names} (for the local stack: set -a; . ~/.cache/kiln/local-secrets.env)`);
  }
  return parsed.data;
}

program
  .command('rebuild-projections')
  .description(
    'rebuild the predictions and batches tables from Temporal workflow history: upserts by revision, page by page; ' +
      'rows whose history Temporal no longer has are kept',
  )
  .action(async () => {
    const connection = await Connection.connect({ address: TEMPORAL_ADDRESS });
    try {
      // Results over the inline limit are stored by reference: reading them needs the bucket too.
      const s3 = bucketSettings('rebuild-projections reads payloads stored by reference in the bucket');
      // The same bucket holds the payloads and Kiln's archive of closed histories (for workflows past the namespace's retention).
      const archive = Storage.fromConfig(s3);
      const temporal = new Client({ connection, namespace: TEMPORAL_NAMESPACE, dataConverter: kilnDataConverter(archive, s3) });
      const started = Date.now();
      const {
        predictions,
        batches,
        archive: archived,
      } = await rebuildProjections(db, temporal, (kind, c) => console.error(`${kind}: read ${c.read} workflow runs…`), archive);
      const secs = ((Date.now() - started) / 1000).toFixed(1);
      for (const [kind, c] of [
        ['predictions', predictions],
        ['batches', batches],
      ] as const) {
        console.log(
          `rebuilt ${c.written} ${kind} from Temporal (read ${c.read} runs; kept ${c.kept} rows that knew as much or more; ${c.unreadable} runs without a readable state)`,
        );
      }
      if (archived) {
        console.log(
          `rebuilt ${archived.written} rows from archived histories of workflows Temporal no longer has (kept ${archived.kept}; ${archived.unreadable} without a result)`,
        );
      }
      console.log(`took ${secs} s`);
    } finally {
      await connection.close();
    }
  });

program
  .command('archived-history <workflowId>')
  .description(
    "print a closed run's history from Kiln's archive in the bucket, as `temporal workflow show --output json` prints it " +
      '(for workflows past the namespace retention; the last run to close unless --run-id)',
  )
  .option('--run-id <runId>', 'this run instead of the last')
  .action(async (workflowId: string, opts: { runId?: string }) => {
    const storage = Storage.fromConfig(bucketSettings('the archive of closed histories is in the bucket'));
    let found: ArchivedHistory | undefined;
    for await (const run of archivedHistories(storage)) {
      if (run.workflowId !== workflowId || (opts.runId && run.runId !== opts.runId)) continue;
      if (!found || run.closedAt > found.closedAt) found = run;
    }
    if (!found) throw new Error(`no archived history of ${workflowId}${opts.runId ? ` run ${opts.runId}` : ''}`);
    process.stdout.write(`${historyToJSON(found.history)}\n`);
  });

program
  .parseAsync()
  .then(() => closeDb(db))
  .catch(async (err) => {
    console.error(`kiln-admin: ${err instanceof Error ? err.message : err}`);
    await closeDb(db);
    process.exit(1);
  });
