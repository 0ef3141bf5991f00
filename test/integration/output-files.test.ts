/**
 * Output files of a retried prediction, against the real database and object store: each attempt
 * stores its file under an id named by the prediction and the attempt, and the prediction's
 * finish removes the files of attempts that failed after storing theirs (their rows and objects),
 * keeping the one the output refers to.
 */
import { Readable } from 'node:stream';
import { MockActivityEnvironment } from '@temporalio/testing';
import { eq } from 'drizzle-orm';
import { createControlActivities } from '../../activities/control';
import { closeDb, type Db } from '../../db/client';
import { beginAttempt } from '../../db/events';
import { getFile, outputFileId, recordOutputFile } from '../../db/files';
import { predictions } from '../../db/schema';
import type { PredictionSnapshot } from '../../domain/prediction-snapshot';
import { config } from '../../lib/config';
import { fileKey } from '../../lib/file-keys';
import { newId } from '../../lib/ids';
import { Storage } from '../../lib/storage';
import { newAccount, testDb } from '../helpers';

let db: Db;
let storage: Storage;
beforeAll(() => {
  db = testDb();
  storage = Storage.fromConfig(config());
});
afterAll(() => closeDb(db));

async function storeOutput(accountId: string, predictionId: string, attempt: number) {
  const id = outputFileId(predictionId, attempt);
  await storage.putStream(fileKey(id), Readable.from([Buffer.from(`png of attempt ${attempt}`)]));
  await recordOutputFile(db, {
    id,
    accountId,
    name: 'output.png',
    contentType: 'image/png',
    size: 16,
    sha256: 'x'.repeat(64),
    predictionId,
  });
  return id;
}

function snapshot(id: string, accountId: string, output: unknown, status: PredictionSnapshot['status']): PredictionSnapshot {
  const now = new Date().toISOString();
  return {
    id,
    accountId,
    model: 'kiln/remove-background',
    versionId: 'v-test',
    input: {},
    output,
    logs: '',
    error: null,
    status,
    metrics: {},
    createdAt: now,
    startedAt: now,
    completedAt: now,
    webhook: null,
    webhookEventsFilter: null,
    deadline: null,
    revision: 1,
  };
}

/** The control activity, run as Temporal runs it (its log needs an activity context). */
type Control = ReturnType<typeof createControlActivities>;
const finish = (control: Control, args: Parameters<Control['finishPrediction']>[0]) =>
  new MockActivityEnvironment().run(control.finishPrediction, args);

test('ids are named by prediction and attempt', () => {
  expect(outputFileId('p1', 1)).toBe(outputFileId('p1', 1));
  expect(new Set([outputFileId('p1', 1), outputFileId('p1', 2), outputFileId('p2', 1)]).size).toBe(3);
  expect(outputFileId('p1', 1)).toMatch(/^[a-z2-7]{26}$/);
});

test("the finish of a retried prediction removes the failed attempt's file and keeps the output's", async () => {
  const { account } = await newAccount(db, 'orphans');
  const control = createControlActivities({ db, storage });
  const id = newId();
  // Attempt 1 stored its file, then its node died before it could answer; attempt 2 began and stored its own.
  const failed = await storeOutput(account.id, id, 1);
  await beginAttempt(db, id, 2);
  const kept = await storeOutput(account.id, id, 2);

  await finish(control, {
    snapshot: snapshot(id, account.id, `kiln-file:${kept}.sig`, 'succeeded'),
    task: 'remove-background',
    hardware: 'cpu',
  });
  expect(await getFile(db, failed)).toBeUndefined();
  expect(await storage.size(fileKey(failed))).toBeUndefined();
  expect((await getFile(db, kept))?.predictionId).toBe(id);
  expect(await storage.size(fileKey(kept))).toBeGreaterThan(0);
  await db.delete(predictions).where(eq(predictions.id, id));
});

test('a prediction that failed keeps no output file', async () => {
  const { account } = await newAccount(db, 'orphans');
  const control = createControlActivities({ db, storage });
  const id = newId();
  const only = await storeOutput(account.id, id, 1);
  await finish(control, {
    snapshot: { ...snapshot(id, account.id, null, 'failed'), error: 'boom' },
    task: 'remove-background',
    hardware: 'cpu',
  });
  expect(await getFile(db, only)).toBeUndefined();
  expect(await storage.size(fileKey(only))).toBeUndefined();
  await db.delete(predictions).where(eq(predictions.id, id));
});
