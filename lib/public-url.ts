/**
 * The base of the absolute URLs Kiln writes. Built from configuration only: a URL built from the
 * request's Host header would let any client point the links others receive (webhooks, stream
 * and file URLs) at a host of its choosing.
 */
import { isIPv6 } from 'node:net';
import type { Config } from './config';

export function publicBaseUrl(c: Pick<Config, 'KILN_PUBLIC_URL' | 'HOST' | 'PORT'>): string {
  if (c.KILN_PUBLIC_URL) return c.KILN_PUBLIC_URL.replace(/\/$/, '');
  // An API on every interface is reached on this machine through loopback; anywhere else needs KILN_PUBLIC_URL.
  const host = c.HOST === '0.0.0.0' ? '127.0.0.1' : c.HOST === '::' ? '::1' : c.HOST;
  return `http://${isIPv6(host) ? `[${host}]` : host}:${c.PORT}`;
}
