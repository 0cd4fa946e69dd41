import { localDay, startOfLocalDay } from './timezone.ts';

/**
 * Challenge progress (CONTRACT §7) as pure functions of one player's stream intervals.
 *
 * Every rule first clips the intervals to the campaign window `[startsAt, endsAt)` and to `now`
 * (a live stream, `stop: null`, counts up to now). Then:
 * - `totalMinutes`: whole minutes of the union of the clipped intervals (two headsets streaming at
 *   once count once);
 * - `singleSessionMinutes`: whole minutes of the longest single clipped interval;
 * - `uniqueDays`: local calendar days (campaign time zone) holding at least 60 s of the union;
 * - `streakDays`: the longest run of consecutive such days;
 * - `sessionCount`: clipped intervals lasting at least 60 s.
 */

export const RULE_TYPES = [
  'totalMinutes',
  'singleSessionMinutes',
  'uniqueDays',
  'streakDays',
  'sessionCount',
] as const;
export type RuleType = (typeof RULE_TYPES)[number];

export type ProgressMetrics = Record<RuleType, number>;

export interface StreamSpan {
  start: number;
  /** null while the stream is live. */
  stop: number | null;
}

export interface ProgressInput {
  intervals: readonly StreamSpan[];
  now: number;
  /** IANA name; days are its calendar days. */
  timezone: string;
  startsAt: number | null;
  endsAt: number | null;
}

/** A closed-open span `[start, end)` of time that counts. */
interface Span {
  start: number;
  end: number;
}

const MINUTE_MS = 60_000;
/** A day counts, and a stream counts as a session, from this much streaming on. */
const MIN_COUNTED_MS = 60_000;

/** The intervals cut to the window and to now; what falls outside disappears. */
export function clipToWindow(input: ProgressInput): Span[] {
  const lower = input.startsAt ?? Number.NEGATIVE_INFINITY;
  const upper = Math.min(input.endsAt ?? Number.POSITIVE_INFINITY, input.now);
  const out: Span[] = [];
  for (const i of input.intervals) {
    const start = Math.max(i.start, lower);
    const end = Math.min(i.stop ?? input.now, upper);
    if (end > start) out.push({ start, end });
  }
  return out;
}

/** Overlapping or touching spans merged; sorted by start. */
export function union(spans: readonly Span[]): Span[] {
  const sorted = [...spans].sort((a, b) => a.start - b.start);
  const out: Span[] = [];
  for (const s of sorted) {
    const last = out[out.length - 1];
    if (last && s.start <= last.end) last.end = Math.max(last.end, s.end);
    else out.push({ ...s });
  }
  return out;
}

const length = (s: Span) => s.end - s.start;
const wholeMinutes = (ms: number) => Math.floor(ms / MINUTE_MS);

export function totalMinutes(input: ProgressInput): number {
  return wholeMinutes(union(clipToWindow(input)).reduce((sum, s) => sum + length(s), 0));
}

export function singleSessionMinutes(input: ProgressInput): number {
  return wholeMinutes(clipToWindow(input).reduce((max, s) => Math.max(max, length(s)), 0));
}

export function sessionCount(input: ProgressInput): number {
  return clipToWindow(input).filter((s) => length(s) >= MIN_COUNTED_MS).length;
}

/** The local days (day numbers, ascending) with at least 60 s of streaming. */
export function countedDays(input: ProgressInput): number[] {
  const perDay = new Map<number, number>();
  for (const span of union(clipToWindow(input))) {
    let cursor = span.start;
    while (cursor < span.end) {
      const day = localDay(cursor, input.timezone);
      let next = startOfLocalDay(day + 1, input.timezone);
      // Never loop in place, whatever the zone data says.
      if (next <= cursor) next = cursor + MINUTE_MS;
      const stop = Math.min(span.end, next);
      perDay.set(day, (perDay.get(day) ?? 0) + (stop - cursor));
      cursor = stop;
    }
  }
  return [...perDay]
    .filter(([, ms]) => ms >= MIN_COUNTED_MS)
    .map(([day]) => day)
    .sort((a, b) => a - b);
}

export function uniqueDays(input: ProgressInput): number {
  return countedDays(input).length;
}

/** The longest run of consecutive numbers in an ascending list of distinct day numbers. */
export function longestRun(days: readonly number[]): number {
  let best = 0;
  let run = 0;
  for (let i = 0; i < days.length; i++) {
    run = i > 0 && days[i] === days[i - 1] + 1 ? run + 1 : 1;
    best = Math.max(best, run);
  }
  return best;
}

export function streakDays(input: ProgressInput): number {
  return longestRun(countedDays(input));
}

/** Every rule's value at once, sharing the clipping, the union and the day split. */
export function computeProgress(input: ProgressInput): ProgressMetrics {
  const clipped = clipToWindow(input);
  const merged = union(clipped);
  const days = countedDays(input);
  return {
    totalMinutes: wholeMinutes(merged.reduce((sum, s) => sum + length(s), 0)),
    singleSessionMinutes: wholeMinutes(clipped.reduce((max, s) => Math.max(max, length(s)), 0)),
    uniqueDays: days.length,
    streakDays: longestRun(days),
    sessionCount: clipped.filter((s) => length(s) >= MIN_COUNTED_MS).length,
  };
}
