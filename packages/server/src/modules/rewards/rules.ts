import { RULE_TYPES, type RuleType } from './progress.ts';

/** The spec's wording of each rule, as tenants write it in the Reward Rules column of the template. */
export const RULE_WORDING: Record<RuleType, string> = {
  totalMinutes: 'Total mins streamed',
  singleSessionMinutes: 'Mins streamed in a single session',
  uniqueDays: 'Unique days streamed on',
  streakDays: 'Streak of days streamed on',
  sessionCount: 'Stream session count',
};

const normalise = (text: string) => text.trim().replace(/\s+/g, ' ').toLowerCase();
const BY_TEXT = new Map<string, RuleType>();
for (const type of RULE_TYPES) {
  BY_TEXT.set(normalise(RULE_WORDING[type]), type);
  BY_TEXT.set(normalise(type), type);
}

/**
 * The rule type a Reward Rules cell names: the spec's wording (case and spacing do not matter) or
 * the API's type name. Null for anything else.
 */
export function ruleFromWording(text: string): RuleType | null {
  return BY_TEXT.get(normalise(text)) ?? null;
}

export const TARGET_MIN = 1;
export const TARGET_MAX = 1_000_000;
