/**
 * Shared by the integration and end-to-end tests: the real stack that infra/test.sh started.
 * Temporal's client is in ./temporal.ts: most files never use it, and each file that loads it pays
 * for its protobuf definitions again in jest's sandbox.
 */
import { eq } from 'drizzle-orm';
import { type Account, createAccount, createApiToken } from '../db/accounts';
import { createDb, type Db } from '../db/client';
import type { ModelVersion } from '../db/models';
import { liveNodes } from '../db/nodes';
import { models, nodes } from '../db/schema';
import type { PredictionSnapshot } from '../domain/prediction-snapshot';
import { newId } from '../lib/ids';
import type { Storage } from '../lib/storage';

export const API_URL = process.env.KILN_API_URL ?? 'http://127.0.0.1:8081';

export const TEST_DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/kiln_test';

export function testDb(): Db {
  return createDb(TEST_DATABASE_URL, { max: 2 });
}

/** A fresh account with its own token, so tests never see each other's predictions. */
export async function newAccount(db: Db, prefix = 'test'): Promise<{ account: Account; token: string }> {
  const account = await createAccount(db, `${prefix}-${newId().slice(0, 10)}`);
  const { token } = await createApiToken(db, account.id, 'test');
  return { account, token };
}

/** A prediction's state as a workflow writes it, revision 1, `starting`, for the repository's tests. */
export const predictionSnapshot = (accountId: string, over: Partial<PredictionSnapshot> = {}): PredictionSnapshot => ({
  id: newId(),
  accountId,
  model: 'kiln/tiny-llama',
  versionId: 'v',
  input: { prompt: 'x' },
  output: null,
  logs: '',
  error: null,
  status: 'starting',
  metrics: {},
  createdAt: new Date().toISOString(),
  startedAt: null,
  completedAt: null,
  revision: 1,
  ...over,
});

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export async function api<T = any>(
  path: string,
  opts: { method?: string; token?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined || opts.rawBody !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${API_URL}${path}`, {
    method: opts.method ?? (opts.body !== undefined || opts.rawBody !== undefined ? 'POST' : 'GET'),
    headers,
    body: opts.rawBody ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body)),
  });
  const text = await res.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: keep the text so the assertion shows it
  }
  return { status: res.status, body, headers: res.headers };
}

/** Polls until `done(value)` holds, or fails with the last value seen. */
export async function poll<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  { timeoutMs = 30_000, intervalMs = 50 } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T = await read();
  while (!done(last)) {
    if (Date.now() > deadline) throw new Error(`poll timed out after ${timeoutMs} ms; last value: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, intervalMs));
    last = await read();
  }
  return last;
}

export const TERMINAL = ['succeeded', 'failed', 'canceled', 'aborted'];

/** Ids of the nodes whose registry row lists the version as loaded (`live`: only nodes whose heartbeat is fresh), sorted. */
export async function nodesHolding(db: Db, versionId: string, opts: { live?: boolean } = {}): Promise<string[]> {
  const rows = opts.live ? await liveNodes(db) : await db.select().from(nodes);
  return rows
    .filter((n) => n.loaded.some((l) => l.versionId === versionId))
    .map((n) => n.id)
    .sort();
}

/** The `owner/name` a version's model is addressed by in the API. */
export async function modelPathOf(db: Db, version: Pick<ModelVersion, 'modelId'>): Promise<string> {
  const model = await db.query.models.findFirst({ where: eq(models.id, version.modelId) });
  return `${model!.owner}/${model!.name}`;
}

/** A prediction created with `Prefer: wait=60`, which must have succeeded by the answer. */
export async function predictWaiting(modelPath: string, token: string, input: Record<string, unknown>): Promise<any> {
  const r = await api(`/v1/models/${modelPath}/predictions`, { token, body: { input }, headers: { prefer: 'wait=60' } });
  expect({ status: r.body.status, error: r.body.error, detail: r.body.detail, fields: r.body.invalid_fields }).toEqual({
    status: 'succeeded',
    error: null,
    detail: undefined,
    fields: undefined,
  });
  return r.body;
}

/** A version's KV snapshot objects in the object tier. */
export async function kvObjectKeys(storage: Storage, versionId: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const page of storage.list(`kv/${versionId}/`)) keys.push(...page);
  return keys;
}
