import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** A new secret: a readable prefix and 256 random bits, base64url. */
export function generateSecret(prefix: string): string {
  return `${prefix}_${randomBytes(32).toString('base64url')}`;
}

/**
 * Keyed SHA-256 of a secret. Secrets carry at least 128 random bits, so a fast keyed digest is
 * enough (no slow password hash), and equal secrets give equal digests, so a row can be found
 * by its secret alone.
 */
export function digestSecret(key: Buffer, secret: string): string {
  return createHmac('sha256', key).update(secret, 'utf8').digest('base64url');
}

/** Constant-time comparison of two strings of any lengths. */
export function constantTimeEqual(a: string, b: string): boolean {
  return constantTimeMatcher(b)(a);
}

/**
 * A constant-time test against one fixed secret, whose digest is taken once: each test then hashes
 * only the candidate (the operator token is tested against every authenticated request).
 */
export function constantTimeMatcher(secret: string): (candidate: string) => boolean {
  const expected = createHash('sha256').update(secret, 'utf8').digest();
  return (candidate) => timingSafeEqual(createHash('sha256').update(candidate, 'utf8').digest(), expected);
}
