/**
 * Where a webhook may go. A URL whose host resolves to a private, loopback, link-local or
 * otherwise internal address is refused unless configuration allows it, so that a prediction
 * cannot make Kiln call into its own network. Delivery connects to the address checked here,
 * so a DNS answer that changes between check and connect (rebinding) cannot slip through.
 */
import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

const internal = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  internal.addSubnet(net, bits, 'ipv4');
}
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  internal.addSubnet(net, bits, 'ipv6');
}

export function isInternalAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  if (family === 6 && address.toLowerCase().startsWith('::ffff:')) return isInternalAddress(address.slice(7));
  return internal.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

export class WebhookTargetError extends Error {
  override name = 'WebhookTargetError';
}

export interface WebhookTarget {
  url: URL;
  address: string;
  family: 4 | 6;
}

/** Parses and resolves a webhook URL, or throws WebhookTargetError saying why it is refused. */
export async function resolveWebhookTarget(raw: string, allowPrivate: boolean): Promise<WebhookTarget> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WebhookTargetError('is not a valid URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new WebhookTargetError('must be an http or https URL');
  if (url.username || url.password) throw new WebhookTargetError('must not contain credentials');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: Array<{ address: string; family: number }>;
  try {
    addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await lookup(host, { all: true });
  } catch {
    throw new WebhookTargetError(`host ${host} does not resolve`);
  }
  if (!allowPrivate) {
    const bad = addresses.find((a) => isInternalAddress(a.address));
    if (bad) throw new WebhookTargetError(`resolves to ${bad.address}, a private or loopback address`);
  }
  const first = addresses[0];
  if (!first) throw new WebhookTargetError(`host ${host} does not resolve`);
  return { url, address: first.address, family: first.family === 6 ? 6 : 4 };
}
