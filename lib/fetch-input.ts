/**
 * Fetches an input file named by a prediction's input: a data URI, one of Kiln's own signed file
 * URLs (read straight from storage), or any http(s) URL — with a size limit, a timeout, and the
 * same refusal of private addresses as webhooks.
 */
import { fileKey } from '../db/files';
import { verifyFileUrl } from './file-urls';
import type { UrlSigner } from './signing';
import type { Storage } from './storage';
import { resolveWebhookTarget, WebhookTargetError } from './webhook-target';

export class InputFetchError extends Error {
  override name = 'InputFetchError';
}

export interface FetchInputDeps {
  storage: Storage;
  signer: UrlSigner;
  allowPrivate: boolean;
  maxBytes: number;
  timeoutMs: number;
}

const DATA_URI = /^data:([^;,]*)(?:;[^,]*)?;base64,(.*)$/s;

export async function fetchInput(source: string, deps: FetchInputDeps, signal?: AbortSignal): Promise<{ bytes: Buffer; contentType?: string }> {
  const data = DATA_URI.exec(source);
  if (data) {
    const bytes = Buffer.from(data[2], 'base64');
    if (bytes.length > deps.maxBytes) throw new InputFetchError(`the data URI holds ${bytes.length} bytes (limit ${deps.maxBytes})`);
    return { bytes, contentType: data[1] || undefined };
  }
  let url: URL;
  try {
    url = new URL(source);
  } catch {
    throw new InputFetchError('is neither a URL nor a data URI');
  }
  const own = /^\/v1\/files\/([a-z2-7]{26})\/content$/.exec(url.pathname);
  if (own && verifyFileUrl(deps.signer, own[1], url.searchParams.get('expires'), url.searchParams.get('sig'))) {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of await deps.storage.read(fileKey(own[1]), { signal })) {
      size += (chunk as Buffer).length;
      if (size > deps.maxBytes) throw new InputFetchError(`the file is larger than ${deps.maxBytes} bytes`);
      chunks.push(chunk as Buffer);
    }
    return { bytes: Buffer.concat(chunks) };
  }
  try {
    await resolveWebhookTarget(source, deps.allowPrivate);
  } catch (err) {
    if (err instanceof WebhookTargetError) throw new InputFetchError(`the URL ${err.message}`);
    throw err;
  }
  const timeout = AbortSignal.timeout(deps.timeoutMs);
  const res = await fetch(url, { signal: signal ? AbortSignal.any([signal, timeout]) : timeout, redirect: 'error' }).catch((err: Error) => {
    throw new InputFetchError(`could not fetch ${url.host}: ${timeout.aborted ? `no answer within ${deps.timeoutMs} ms` : err.message}`);
  });
  if (!res.ok || !res.body) throw new InputFetchError(`${url.host} answered ${res.status}`);
  const declared = Number(res.headers.get('content-length') ?? 0);
  if (declared > deps.maxBytes) throw new InputFetchError(`the file has ${declared} bytes (limit ${deps.maxBytes})`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += chunk.length;
    if (size > deps.maxBytes) throw new InputFetchError(`the file is larger than ${deps.maxBytes} bytes`);
    chunks.push(Buffer.from(chunk));
  }
  return { bytes: Buffer.concat(chunks), contentType: res.headers.get('content-type') ?? undefined };
}
