import { createHmac, randomBytes } from 'node:crypto';

/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): the signed content is
 * `${webhookId}.${timestampSeconds}.${body}`, HMAC-SHA256 under the secret's bytes (the base64 after
 * `whsec_`), sent as `v1,<base64>`; several signatures are separated by spaces.
 */

export const SECRET_PREFIX = 'whsec_';

/** A new endpoint secret: 32 random bytes. */
export function generateSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

function secretKey(secret: string): Buffer {
  return Buffer.from(
    secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret,
    'base64',
  );
}

export function sign(secret: string, webhookId: string, timestampS: number, body: string): string {
  const mac = createHmac('sha256', secretKey(secret)).update(`${webhookId}.${timestampS}.${body}`);
  return `v1,${mac.digest('base64')}`;
}

/** The `webhook-signature` header: one signature per active secret (two during a rotation's overlap). */
export function signatureHeader(
  secrets: readonly string[],
  webhookId: string,
  timestampS: number,
  body: string,
) {
  return secrets.map((s) => sign(s, webhookId, timestampS, body)).join(' ');
}

/** The headers of one attempt. */
export function webhookHeaders(secrets: readonly string[], webhookId: string, now: number, body: string) {
  const timestampS = Math.floor(now / 1000);
  return {
    'webhook-id': webhookId,
    'webhook-timestamp': String(timestampS),
    'webhook-signature': signatureHeader(secrets, webhookId, timestampS, body),
  };
}
