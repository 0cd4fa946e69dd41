import { randomBytes } from 'node:crypto';

/**
 * Claim codes (CONTRACT §7). Both are drawn from the 32-character alphabet without the lookalikes
 * 0/O and 1/I, so they survive being read aloud or typed from a headset: a byte from the CSPRNG
 * masked to 5 bits picks a character without bias (256 is a multiple of 32).
 */
export const CODE_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';

const DISPLAY_LENGTH = 8;
/** 26 characters × 5 bits = 130 random bits. */
const ACHIEVEMENT_LENGTH = 26;
const IN_ALPHABET = new RegExp(`^[${CODE_ALPHABET}]+$`);

function randomCode(length: number): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const b of bytes) out += CODE_ALPHABET[b & 31];
  return out;
}

/** `XXXX-XXXX`: what the player types into the tenant's claims machine. */
export function newDisplayCode(): string {
  const raw = randomCode(DISPLAY_LENGTH);
  return `${raw.slice(0, 4)}-${raw.slice(4)}`;
}

/** The entitlement passed in intent and web URL redemptions: 130 random bits. */
export function newAchievementCode(): string {
  return randomCode(ACHIEVEMENT_LENGTH);
}

export type VerificationCode = { kind: 'display'; code: string } | { kind: 'achievement'; code: string };

/**
 * A `verificationCode` as the tenant sent it, in its stored form: case does not matter, and neither do
 * hyphens or spaces (`abcd-efgh`, `ABCDEFGH` and `abcd efgh` are one code). Characters outside the
 * alphabet are not mapped to their lookalikes (`0` is not read as anything): such a code cannot exist,
 * so it is not found. Null when the text cannot be a code at all.
 */
export function parseVerificationCode(input: string): VerificationCode | null {
  const compact = input.replace(/[\s-]/g, '').toUpperCase();
  if (!IN_ALPHABET.test(compact)) return null;
  if (compact.length === DISPLAY_LENGTH) {
    return { kind: 'display', code: `${compact.slice(0, 4)}-${compact.slice(4)}` };
  }
  if (compact.length === ACHIEVEMENT_LENGTH) return { kind: 'achievement', code: compact };
  return null;
}
