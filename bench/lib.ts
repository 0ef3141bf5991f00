/** Shared by the benchmark scenarios: the running stack, figures and tables. */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { accountForToken, updateAccount } from '../db/accounts';
import { closeDb, createDb } from '../db/client';

export const API_URL = process.env.KILN_API_URL ?? 'http://127.0.0.1:8080';
export const DATA_DIR = process.env.KILN_DATA_DIR ?? path.resolve('.data');

export async function apiToken(): Promise<string> {
  return process.env.KILN_API_TOKEN ?? (await readFile(path.join(DATA_DIR, 'api-token'), 'utf8')).trim();
}

/**
 * The token's account with per-minute limits on `tasks` that a benchmark's load stays under: a
 * scenario that keeps streams going makes hundreds of predictions a minute, past an account's
 * default limit, and measures the engine, not the limiter.
 */
export async function unlimitedFor(token: string, tasks: string[]): Promise<void> {
  const db = createDb(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/kiln', { max: 1 });
  try {
    const account = await accountForToken(db, token);
    if (!account) throw new Error('the bench token names no account');
    await updateAccount(db, account.id, { rateLimits: { ...account.rateLimits, ...Object.fromEntries(tasks.map((t) => [t, 1_000_000])) } });
  } finally {
    await closeDb(db);
  }
}

// biome-ignore lint/suspicious/noExplicitAny: API JSON, read field by field by each scenario
export async function call(token: string, route: string, body?: unknown, headers: Record<string, string> = {}): Promise<any> {
  const res = await fetch(`${API_URL}${route}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(`${route}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

export const ms = (v: number) => (Number.isFinite(v) ? `${v.toFixed(1)} ms` : '-');

export function table(title: string, rows: Array<Record<string, string | number>>): void {
  console.log(`\n${title}`);
  console.table(rows);
}

/** Runs `task` `total` times with at most `concurrency` at once. */
export async function pool<T>(total: number, concurrency: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array(total);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, total) }, async () => {
      while (next < total) {
        const i = next++;
        results[i] = await task(i);
      }
    }),
  );
  return results;
}

export async function saveResult(name: string, result: unknown): Promise<string> {
  const dir = path.join(DATA_DIR, 'bench');
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, `${name}-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  await writeFile(file, JSON.stringify({ name, at: new Date().toISOString(), result }, null, 2));
  return file;
}

/**
 * Pushes a local GGUF as a new private text-generation model of the token's account (the blob is
 * uploaded unless the store has it): the path a user's `kiln push` takes, with the version's settings.
 */
export async function pushGguf(
  token: string,
  file: { path: string; sha256: string; size: number },
  name: string,
  settings: Record<string, number>,
  /** More fields of the version's create body (memory_bytes, retry). */
  version: Record<string, unknown> = {},
): Promise<string> {
  const { createReadStream } = await import('node:fs');
  const { Readable } = await import('node:stream');
  const account = await call(token, '/v1/account');
  await call(token, '/v1/models', { owner: account.username, name, visibility: 'private', task: 'text-generation' });
  const blob = `${API_URL}/v1/blobs/sha256/${file.sha256}`;
  const head = await fetch(blob, { method: 'HEAD', headers: { authorization: `Bearer ${token}` } });
  if (head.status !== 200) {
    const put = await fetch(blob, {
      method: 'PUT',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' },
      body: Readable.toWeb(createReadStream(file.path)) as unknown as RequestInit['body'],
      duplex: 'half',
    } as RequestInit);
    if (!put.ok) throw new Error(`upload: ${put.status}`);
  }
  await call(token, `/v1/models/${account.username}/${name}/versions`, {
    files: [{ path: 'model.gguf', sha256: file.sha256, size: file.size }],
    settings,
    ...version,
  });
  return `${account.username}/${name}`;
}

/** Creates a prediction of `model` and reads its SSE stream to the end: times from the create request. */
export async function streamPrediction(token: string, model: string, input: Record<string, unknown>) {
  const t0 = performance.now();
  const p = await call(token, `/v1/models/${model}/predictions`, { input });
  const created = performance.now() - t0;
  const res = await fetch(p.urls.stream, { headers: { accept: 'text/event-stream' } });
  const { EventSourceParserStream } = await import('eventsource-parser/stream');
  const reader = res.body!.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  let first: number | undefined;
  let last = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done || value.event === 'done') break;
    if (value.event === 'error') throw new Error(`prediction ${p.id} failed: ${value.data}`);
    if (value.event === 'output') {
      first ??= performance.now();
      last = performance.now();
    }
  }
  return { id: p.id as string, created, ttft: first! - t0, total: last - t0 };
}

/**
 * The area under the ROC curve of `scores` for telling the positives from the rest: the chance
 * that a positive drawn at random scores higher than a negative drawn at random, ties counting
 * half (the Mann–Whitney U statistic over all positive–negative pairs). 1 separates them fully,
 * 0.5 is chance. NaN without both a positive and a negative.
 */
export function rocAuc(scores: readonly number[], positive: readonly boolean[]): number {
  if (scores.length !== positive.length) throw new Error(`${scores.length} scores for ${positive.length} labels`);
  const pos = scores.filter((_, i) => positive[i]);
  const neg = scores.filter((_, i) => !positive[i]);
  if (pos.length === 0 || neg.length === 0) return NaN;
  let wins = 0;
  for (const p of pos) for (const n of neg) wins += p > n ? 1 : p === n ? 0.5 : 0;
  return wins / (pos.length * neg.length);
}
