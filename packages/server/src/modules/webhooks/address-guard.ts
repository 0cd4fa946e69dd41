import dns from 'node:dns';
import net from 'node:net';

/**
 * The SSRF guard's rules: which addresses a webhook may not reach unless
 * `LIVELINE_WEBHOOK_ALLOW_PRIVATE=true`. Pure classification first; the resolving helpers below.
 */
export type AddressClass =
  | 'public'
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'unique-local'
  | 'cgnat'
  | 'metadata'
  | 'multicast'
  | 'documentation'
  | 'reserved';

type Range = [bytes: number[], prefix: number, cls: Exclude<AddressClass, 'public'>];

const v4 = (s: string) => s.split('.').map(Number);

// Most specific first: the first match wins.
const V4_RANGES: Range[] = [
  [v4('169.254.169.254'), 32, 'metadata'], // AWS, GCP, Azure, OpenStack instance metadata
  [v4('168.63.129.16'), 32, 'metadata'], // Azure wire server (a public address)
  [v4('100.100.100.200'), 32, 'metadata'], // Alibaba Cloud
  [v4('0.0.0.0'), 8, 'unspecified'],
  [v4('10.0.0.0'), 8, 'private'],
  [v4('100.64.0.0'), 10, 'cgnat'],
  [v4('127.0.0.0'), 8, 'loopback'],
  [v4('169.254.0.0'), 16, 'link-local'],
  [v4('172.16.0.0'), 12, 'private'],
  [v4('192.0.0.0'), 24, 'reserved'],
  [v4('192.0.2.0'), 24, 'documentation'],
  [v4('192.88.99.0'), 24, 'reserved'],
  [v4('192.168.0.0'), 16, 'private'],
  [v4('198.18.0.0'), 15, 'reserved'],
  [v4('198.51.100.0'), 24, 'documentation'],
  [v4('203.0.113.0'), 24, 'documentation'],
  [v4('224.0.0.0'), 4, 'multicast'],
  [v4('240.0.0.0'), 4, 'reserved'],
];

const V6_RANGES: Range[] = [
  [parseV6('fd00:ec2::254')!, 128, 'metadata'], // AWS instance metadata over IPv6
  [parseV6('::')!, 128, 'unspecified'],
  [parseV6('::1')!, 128, 'loopback'],
  [parseV6('::')!, 96, 'reserved'], // IPv4-compatible (deprecated)
  [parseV6('64:ff9b:1::')!, 48, 'private'], // local-use NAT64
  [parseV6('100::')!, 64, 'reserved'], // discard-only
  [parseV6('2001::')!, 32, 'reserved'], // Teredo: the IPv4 address inside is obfuscated
  [parseV6('2001:2::')!, 48, 'reserved'], // benchmarking
  [parseV6('2001:db8::')!, 32, 'documentation'],
  [parseV6('3fff::')!, 20, 'documentation'],
  [parseV6('fc00::')!, 7, 'unique-local'],
  [parseV6('fe80::')!, 10, 'link-local'],
  [parseV6('fec0::')!, 10, 'private'], // site-local (deprecated)
  [parseV6('ff00::')!, 8, 'multicast'],
];

function inRange(bytes: number[], [base, prefix]: Range): boolean {
  for (let bit = 0; bit < prefix; bit += 8) {
    const take = Math.min(8, prefix - bit);
    const mask = (0xff << (8 - take)) & 0xff;
    if ((bytes[bit / 8] & mask) !== (base[bit / 8] & mask)) return false;
  }
  return true;
}

/** The 16 bytes of an IPv6 address (zone id ignored), or null when it is not one. */
export function parseV6(address: string): number[] | null {
  let text = address.replace(/^\[|\]$/g, '');
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  if (!net.isIPv6(text)) return null;
  let tail: number[] = [];
  // An embedded dotted IPv4 tail (::ffff:1.2.3.4) counts as two groups.
  const lastColon = text.lastIndexOf(':');
  if (text.slice(lastColon + 1).includes('.')) {
    tail = v4(text.slice(lastColon + 1));
    text = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const [head, rest] = text.includes('::') ? text.split('::') : [text, null];
  const groups = (s: string) => (s === '' ? [] : s.split(':').map((g) => Number.parseInt(g, 16)));
  const left = groups(head);
  const right = rest === null ? [] : groups(rest);
  const all =
    rest === null ? left : [...left, ...new Array(8 - left.length - right.length).fill(0), ...right];
  const bytes = all.flatMap((g) => [g >> 8, g & 0xff]);
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes;
}

/** The IPv4 address an IPv6 address carries (mapped, NAT64 well-known prefix, 6to4), if any. */
function embeddedV4(bytes: number[]): number[] | null {
  const zeros = (from: number, to: number) => bytes.slice(from, to).every((b) => b === 0);
  if (zeros(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff) return bytes.slice(12);
  if (inRange(bytes, [parseV6('64:ff9b::')!, 96, 'reserved'])) return bytes.slice(12);
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return bytes.slice(2, 6);
  return null;
}

function classifyV4(bytes: number[]): AddressClass {
  return V4_RANGES.find((r) => inRange(bytes, r))?.[2] ?? 'public';
}

/** What kind of address `address` (IPv4, IPv6, IPv4-mapped IPv6) is; null when it is not an IP address. */
export function classifyAddress(address: string): AddressClass | null {
  if (net.isIPv4(address)) return classifyV4(v4(address));
  const bytes = parseV6(address);
  if (!bytes) return null;
  const inner = embeddedV4(bytes);
  if (inner) return classifyV4(inner);
  return V6_RANGES.find((r) => inRange(bytes, r))?.[2] ?? 'public';
}

/**
 * A target webhooks may not reach. Its `message` is what the tenant may read: it names the host they
 * gave, never the address it resolved to (that would map the server's network for them). The address
 * and its class are in `address`, `cls` and `logDetail`, for the server log only.
 */
export class BlockedAddressError extends Error {
  readonly code = 'EWEBHOOKBLOCKED';
  constructor(
    readonly host: string,
    readonly address: string,
    readonly cls: AddressClass,
  ) {
    super(`${host} is not allowed: webhooks may reach public addresses only`);
    this.name = 'BlockedAddressError';
  }

  /** What the server log says: the resolved address and its class. */
  get logDetail() {
    return { host: this.host, address: this.address, addressClass: this.cls };
  }
}

/** Every address a host name resolves to (`dns.lookup` with `all`); tests pass their own. */
export type Resolve = (hostname: string) => Promise<{ address: string; family: number }[]>;

export const systemResolve: Resolve = (hostname) =>
  dns.promises.lookup(hostname, { all: true, verbatim: true });

function firstBlocked(host: string, addresses: { address: string }[]): BlockedAddressError | null {
  for (const { address } of addresses) {
    const cls = classifyAddress(address);
    if (cls !== 'public') return new BlockedAddressError(host, address, cls ?? 'reserved');
  }
  return null;
}

/**
 * Resolves `hostname` and throws BlockedAddressError when any address it resolves to is not public
 * (one private answer is enough: an attacker controls the order). DNS errors propagate.
 */
export async function assertPublicHost(hostname: string, resolve: Resolve = systemResolve): Promise<void> {
  const host = hostname.replace(/^\[|\]$/g, '');
  const literal = classifyAddress(host);
  if (literal !== null) {
    if (literal !== 'public') throw new BlockedAddressError(host, host, literal);
    return;
  }
  const blocked = firstBlocked(host, await resolve(host));
  if (blocked) throw blocked;
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | dns.LookupAddress[],
  family?: number,
) => void;

/** The `lookup` option of `net.connect`. */
export type ConnectLookup = (hostname: string, options: dns.LookupOptions, callback: LookupCallback) => void;

/**
 * A `lookup` for `net.connect`: resolves with `resolve` and, when `guard` is set, refuses unless every
 * answer is public. It is the check at connect time, and the addresses it checks are the ones the
 * socket connects to (it hands them to `net.connect` itself: nothing resolves the name again), so a
 * name that resolved to a public address at registration cannot be re-pointed at an internal one
 * (DNS rebinding). Node calls it with `all: true` when it races address families.
 */
export function connectLookup(resolve: Resolve, guard: boolean): ConnectLookup {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (answers) => {
        const wanted = options.family === 4 || options.family === 6 ? options.family : null;
        const addresses = wanted === null ? answers : answers.filter((a) => a.family === wanted);
        const blocked = guard ? firstBlocked(hostname, answers) : null;
        if (blocked) return callback(blocked, []);
        const first = addresses[0];
        if (!first)
          return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), []);
        if (options.all) return callback(null, addresses);
        callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, []),
    );
  };
}
