/**
 * Fetches an input file named by a prediction's input: a data URI, one of Kiln's own signed file
 * URLs (read straight from storage), or any http(s) URL — with a size limit, a timeout, and the
 * same refusal of private addresses as webhooks. Like webhooks, it connects to the address it
 * checked, and follows redirects itself so that every hop is checked too.
 */
import { fileKey } from './file-keys';
import { verifyFileUrl } from './file-urls';
import { KilnError } from './kiln-error';
import { pinnedRequest } from './pinned-request';
import type { UrlSigner } from './signing';
import type { Storage } from './storage';
import { type HostLookup, resolveWebhookTarget, WebhookTargetError } from './webhook-target';

export class InputFetchError extends KilnError {}

/** The input is bigger than the limit it was fetched under. */
export class InputTooLargeError extends InputFetchError {
  constructor(
    message: string,
    readonly limit: number,
  ) {
    super(message);
  }
}

export interface FetchInputDeps {
  storage: Storage;
  signer: UrlSigner;
  allowPrivate: boolean;
  maxBytes: number;
  timeoutMs: number;
  /** Name resolution and exceptions to the private-address refusal (see TargetOptions). */
  lookup?: HostLookup;
  allowAddresses?: readonly string[];
}

const DATA_URI = /^data:([^;,]*)(?:;[^,]*)?;base64,(.*)$/s;

export async function fetchInput(
  source: string,
  deps: FetchInputDeps,
  signal?: AbortSignal,
): Promise<{ bytes: Buffer; contentType?: string }> {
  const data = DATA_URI.exec(source);
  if (data) {
    const bytes = Buffer.from(data[2], 'base64');
    if (bytes.length > deps.maxBytes)
      throw new InputTooLargeError(`the data URI holds ${bytes.length} bytes (limit ${deps.maxBytes})`, deps.maxBytes);
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
      if (size > deps.maxBytes) throw new InputTooLargeError(`the file is larger than ${deps.maxBytes} bytes`, deps.maxBytes);
      chunks.push(chunk as Buffer);
    }
    return { bytes: Buffer.concat(chunks) };
  }
  return fetchOverNetwork(url, deps, signal);
}

/** Redirects a fetch follows; each hop is checked like the first. */
export const MAX_REDIRECTS = 5;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

async function fetchOverNetwork(first: URL, deps: FetchInputDeps, signal?: AbortSignal): Promise<{ bytes: Buffer; contentType?: string }> {
  const timeout = AbortSignal.timeout(deps.timeoutMs);
  const abort = signal ? AbortSignal.any([signal, timeout]) : timeout;
  const failed = (url: URL, err: Error) =>
    new InputFetchError(`could not fetch ${url.host}: ${timeout.aborted ? `no answer within ${deps.timeoutMs} ms` : err.message}`);
  let url = first;
  for (let hop = 0; ; hop++) {
    let target;
    try {
      target = await resolveWebhookTarget(url.href, deps.allowPrivate, { lookup: deps.lookup, allowAddresses: deps.allowAddresses });
    } catch (err) {
      if (err instanceof WebhookTargetError)
        throw new InputFetchError(`${hop === 0 ? 'the URL' : `the redirect to ${url.href}`} ${err.message}`);
      throw err;
    }
    const res = await pinnedRequest(target, {
      method: 'GET',
      headers: { 'user-agent': 'Kiln-Inputs/1.0', accept: '*/*' },
      timeoutMs: deps.timeoutMs,
      signal: abort,
    }).catch((err: Error) => {
      throw failed(url, err);
    });
    const status = res.statusCode ?? 0;
    if (REDIRECTS.has(status)) {
      res.resume();
      const location = res.headers.location;
      if (!location) throw new InputFetchError(`${url.host} answered ${status} with no Location`);
      if (hop >= MAX_REDIRECTS) throw new InputFetchError(`more than ${MAX_REDIRECTS} redirects`);
      try {
        url = new URL(location, url);
      } catch {
        throw new InputFetchError(`${url.host} redirected to an invalid URL`);
      }
      continue;
    }
    if (status < 200 || status >= 300) {
      res.resume();
      throw new InputFetchError(`${url.host} answered ${status}`);
    }
    const declared = Number(res.headers['content-length'] ?? 0);
    if (declared > deps.maxBytes) {
      res.destroy();
      throw new InputTooLargeError(`the file has ${declared} bytes (limit ${deps.maxBytes})`, deps.maxBytes);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of res as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > deps.maxBytes) {
          res.destroy();
          throw new InputTooLargeError(`the file is larger than ${deps.maxBytes} bytes`, deps.maxBytes);
        }
        chunks.push(chunk);
      }
    } catch (err) {
      if (err instanceof InputFetchError) throw err;
      throw failed(url, err as Error);
    }
    return { bytes: Buffer.concat(chunks), contentType: res.headers['content-type'] };
  }
}
