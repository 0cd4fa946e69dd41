import { normalizeIP } from '@fastify/rate-limit';

/**
 * The part of a caller's address that a per-address limit counts: an IPv4 address as it is (also
 * when written IPv4-mapped, `::ffff:192.0.2.1`), an IPv6 address by its /64 prefix — one subscriber
 * line or host usually holds a whole /64, so counting single IPv6 addresses would let one guesser
 * rotate through 2^64 of them.
 */
export function addressKey(ip: string): string {
  try {
    return normalizeIP(ip, 64);
  } catch {
    // Not an address (a test's or a proxy's oddity): counted as written.
    return ip.toLowerCase();
  }
}
