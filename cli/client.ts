/** The HTTP side of the kiln CLI: where the API is, the token, and JSON calls with clear errors. */
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KilnError } from '../lib/kiln-error';

export class CliError extends KilnError {
  /** The API's HTTP status, where the error is its answer. */
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface ApiContext {
  url: string;
  token: string;
}

export const CONFIG_FILE = path.join(process.env.XDG_CONFIG_HOME ?? path.join(os.homedir(), '.config'), 'kiln', 'credentials.json');

/** KILN_API_URL / KILN_API_TOKEN, then `kiln login`'s file, then the local stack's .data/api-token. */
export function apiContext(): ApiContext {
  const saved = existsSync(CONFIG_FILE) ? (JSON.parse(readFileSync(CONFIG_FILE, 'utf8')) as Partial<ApiContext>) : {};
  const url = (process.env.KILN_API_URL ?? saved.url ?? 'http://127.0.0.1:8080').replace(/\/$/, '');
  const local = path.resolve('.data/api-token');
  const token = process.env.KILN_API_TOKEN ?? saved.token ?? (existsSync(local) ? readFileSync(local, 'utf8').trim() : undefined);
  if (!token) throw new CliError('no API token: run `kiln login`, or set KILN_API_TOKEN');
  return { url, token };
}

export async function request<T = unknown>(ctx: ApiContext, route: string, init: RequestInit & { json?: unknown } = {}): Promise<T> {
  const headers: Record<string, string> = { authorization: `Bearer ${ctx.token}`, ...(init.headers as Record<string, string>) };
  let body = init.body;
  if (init.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(init.json);
  }
  let res: Response;
  try {
    res = await fetch(`${ctx.url}${route}`, { ...init, headers, body, duplex: 'half' } as RequestInit);
  } catch (err) {
    throw new CliError(`cannot reach the Kiln API at ${ctx.url} (${(err as Error).message}): is it running? (npm start)`);
  }
  const text = await res.text();
  const json = text ? JSON.parse(text) : undefined;
  if (!res.ok) {
    const detail = json?.detail ?? text;
    if (res.status === 401) throw new CliError(`the API refused the token (${detail}): run \`kiln login\``);
    throw new CliError(`${init.method ?? 'GET'} ${route}: ${res.status} ${detail}`, res.status);
  }
  return json as T;
}
