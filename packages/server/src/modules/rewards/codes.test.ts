import { describe, expect, it } from 'vitest';
import { CODE_ALPHABET, newAchievementCode, newDisplayCode, parseVerificationCode } from './codes.ts';

describe('claim codes', () => {
  it('display codes are XXXX-XXXX from the alphabet, and differ', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const code = newDisplayCode();
      expect(code).toMatch(/^[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{4}-[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{4}$/);
      seen.add(code);
    }
    expect(seen.size).toBe(2000);
  });

  it('every alphabet character turns up (no bias towards a subset)', () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 4000; i++)
      for (const ch of newDisplayCode().replace('-', '')) counts.set(ch, (counts.get(ch) ?? 0) + 1);
    expect([...counts.keys()].sort().join('')).toBe([...CODE_ALPHABET].sort().join(''));
    // 32 000 draws over 32 characters: each near 1000.
    for (const n of counts.values()) expect(n).toBeGreaterThan(800);
  });

  it('achievement codes carry at least 128 random bits', () => {
    const code = newAchievementCode();
    expect(code).toMatch(/^[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{26}$/);
    expect(code.length * Math.log2(CODE_ALPHABET.length)).toBeGreaterThanOrEqual(128);
    expect(newAchievementCode()).not.toBe(code);
  });

  it.each([
    ['ABCD-EFGH', 'ABCD-EFGH'],
    ['abcd-efgh', 'ABCD-EFGH'],
    ['ABCDEFGH', 'ABCD-EFGH'],
    ['  abcd efgh ', 'ABCD-EFGH'],
    ['ab-cd-ef-gh', 'ABCD-EFGH'],
  ])('display code %j is read as %s', (input, code) => {
    expect(parseVerificationCode(input)).toEqual({ kind: 'display', code });
  });

  it('achievement codes are read too, case-insensitively', () => {
    const code = newAchievementCode();
    expect(parseVerificationCode(code.toLowerCase())).toEqual({ kind: 'achievement', code });
  });

  it.each([
    ['lookalike 0 for O', 'ABCD-EFG0'],
    ['lookalike 1 for I', 'ABC1-EFGH'],
    ['O', 'OBCD-EFGH'],
    ['I', 'IBCD-EFGH'],
    ['too short', 'ABCD-EFG'],
    ['too long', 'ABCD-EFGHJ'],
    ['symbols', 'ABCD_EFGH'],
    ['empty', ''],
    ['unicode lookalike', 'ΑBCD-EFGH'],
  ])('%s cannot be a code', (_name, input) => {
    expect(parseVerificationCode(input)).toBeNull();
  });
});
