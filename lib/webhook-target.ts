/**
 * Where Kiln may connect on a tenant's behalf (webhooks, input URLs). A URL whose host resolves
 * to a private, loopback, link-local or otherwise internal address is refused unless
 * configuration allows it, so that a prediction cannot make Kiln call into its own network.
 * Callers connect to the address checked here (lib/pinned-request.ts), so a DNS answer that
 * changes between check and connect (rebinding) cannot slip through.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { KilnError } from './kiln-error';

const internal = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  // The 6to4 relay anycast: whatever answers there is some operator's relay into IPv6.
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  internal.addSubnet(net, bits, 'ipv4');
}
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  // Local-use NAT64 (RFC 8215): the operator decides what it maps to, so nothing can be checked.
  ['64:ff9b:1::', 48],
  ['100::', 64],
  // IETF protocol assignments: Teredo (2001::/32, whose client address is obfuscated), benchmarking, ORCHID.
  ['2001::', 23],
  ['2001:db8::', 32],
  ['3fff::', 20],
  ['5f00::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  internal.addSubnet(net, bits, 'ipv6');
}

/** The 16 bytes of an IPv6 address (a zone id dropped), or undefined if it is not one. */
function ipv6Bytes(address: string): Buffer | undefined {
  const plain = address.split('%')[0];
  if (isIP(plain) !== 6) return undefined;
  let text = plain.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted[1].split('.').map(Number);
    text = `${text.slice(0, -dotted[1].length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  const bytes = Buffer.alloc(16);
  groups.forEach((g, i) => bytes.writeUInt16BE(parseInt(g, 16), i * 2));
  return bytes;
}

const v4 = (bytes: Buffer, at: number) => [...bytes.subarray(at, at + 4)].join('.');
const zeros = (bytes: Buffer, from: number, to: number) => bytes.subarray(from, to).every((b) => b === 0);

/**
 * The IPv4 address an IPv6 address stands for, where it embeds one that a host or a translator
 * on the way would connect to: IPv4-mapped and -compatible, SIIT's IPv4-translated, NAT64's
 * well-known prefix (RFC 6052) and 6to4.
 */
function embeddedIpv4(bytes: Buffer): string | undefined {
  if (zeros(bytes, 0, 10) && bytes.readUInt16BE(10) === 0xffff) return v4(bytes, 12);
  if (zeros(bytes, 0, 12)) return v4(bytes, 12);
  if (zeros(bytes, 0, 8) && bytes.readUInt16BE(8) === 0xffff && zeros(bytes, 10, 12)) return v4(bytes, 12);
  if (bytes.readUInt32BE(0) === 0x0064ff9b && zeros(bytes, 4, 12)) return v4(bytes, 12);
  if (bytes.readUInt16BE(0) === 0x2002) return v4(bytes, 2);
  return undefined;
}

export function isInternalAddress(address: string): boolean {
  const family = isIP(address.split('%')[0]);
  if (family === 0) return true;
  if (family === 4) return internal.check(address, 'ipv4');
  const bytes = ipv6Bytes(address)!;
  if (internal.check(address.split('%')[0], 'ipv6')) return true;
  const inner = embeddedIpv4(bytes);
  // 6to4 and NAT64 reach the IPv4 address inside: it must be public itself.
  return inner !== undefined && internal.check(inner, 'ipv4');
}

export class WebhookTargetError extends KilnError {}

export interface WebhookTarget {
  url: URL;
  address: string;
  family: 4 | 6;
}

/** Every address a host name has, as `dns.promises.lookup(host, { all: true })` gives them. */
export type HostLookup = (host: string) => Promise<Array<{ address: string; family: number }>>;

const systemLookup: HostLookup = (host) => dnsLookup(host, { all: true });

export interface TargetOptions {
  /** Where names are resolved (the system resolver unless a test brings its own). */
  lookup?: HostLookup;
  /** Internal addresses let through anyway: an operator's own hosts, or a test's loopback server. */
  allowAddresses?: readonly string[];
}

/** Parses and resolves a webhook URL, or throws WebhookTargetError saying why it is refused. */
export async function resolveWebhookTarget(raw: string, allowPrivate: boolean, options: TargetOptions = {}): Promise<WebhookTarget> {
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
    addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await (options.lookup ?? systemLookup)(host);
  } catch {
    throw new WebhookTargetError(`host ${host} does not resolve`);
  }
  if (!allowPrivate) {
    const bad = addresses.find((a) => isInternalAddress(a.address) && !options.allowAddresses?.includes(a.address));
    if (bad) throw new WebhookTargetError(`resolves to ${bad.address}, a private or loopback address`);
  }
  const first = addresses[0];
  if (!first) throw new WebhookTargetError(`host ${host} does not resolve`);
  return { url, address: first.address, family: first.family === 6 ? 6 : 4 };
}
