/** Shared by the benchmark scenarios: the running stack, figures and tables. */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

export const API_URL = process.env.KILN_API_URL ?? 'http://127.0.0.1:8080';
export const DATA_DIR = process.env.KILN_DATA_DIR ?? path.resolve('.data');

export async function apiToken(): Promise<string> {
  return process.env.KILN_API_TOKEN ?? (await readFile(path.join(DATA_DIR, 'api-token'), 'utf8')).trim();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON, read field by field by each scenario
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
