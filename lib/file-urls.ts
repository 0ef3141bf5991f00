/**
 * Signed, expiring URLs for stored files, and the rendering of `kiln-file:<id>` references in
 * outputs into such URLs each time a prediction is read, so a URL never outlives its expiry.
 */
import { signUntil, verifyUntil } from './expiring-signature';
import { FILE_REF_PREFIX } from './file-keys';
import type { UrlSigner } from './signing';

export const FILE_URL_TTL_SECONDS = 3600;

export function signedFileUrl(baseUrl: string, signer: UrlSigner, id: string, now = Date.now()): string {
  return `${baseUrl}/v1/files/${id}/content?${signUntil(signer, `file:${id}`, FILE_URL_TTL_SECONDS, now)}`;
}

export function verifyFileUrl(signer: UrlSigner, id: string, expires: unknown, sig: unknown, now = Date.now()): boolean {
  return verifyUntil(signer, `file:${id}`, expires, sig, now);
}

export function fileRef(signer: UrlSigner, id: string): string {
  return `${FILE_REF_PREFIX}${id}.${signer.sign(`ref:${id}`)}`;
}

/**
 * Every genuine `kiln-file:` reference in a value, turned into a URL (signed, unless `link` says
 * otherwise: a stored batch output outlives any signature); anything else is left as it is.
 */
export function renderFileRefs<T>(
  value: T,
  baseUrl: string,
  signer: UrlSigner,
  link = (id: string) => signedFileUrl(baseUrl, signer, id),
): T {
  if (typeof value === 'string') {
    const m = value.startsWith(FILE_REF_PREFIX) ? /^kiln-file:([a-z2-7]{26})\.([\w-]+)$/.exec(value) : null;
    return (m && signer.verify(`ref:${m[1]}`, m[2]) ? link(m[1]) : value) as T;
  }
  if (Array.isArray(value)) return value.map((v) => renderFileRefs(v, baseUrl, signer, link)) as T;
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renderFileRefs(v, baseUrl, signer, link)])) as T;
  }
  return value;
}
