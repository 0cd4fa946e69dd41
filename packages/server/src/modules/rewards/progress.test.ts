import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  computeProgress,
  longestRun,
  type ProgressInput,
  type ProgressMetrics,
  RULE_TYPES,
  sessionCount,
  singleSessionMinutes,
  streakDays,
  totalMinutes,
  uniqueDays,
} from './progress.ts';
import { canonicalTimeZone, DAY_MS, localDay, startOfLocalDay } from './timezone.ts';

const repoRoot = fileURLToPath(new URL('../../../../../', import.meta.url));
/**
 * The shared reference cases (CONTRACT §7) live beside the repository, where CI puts them; a copy
 * ships in the repository so a lone clone tests too. When both are there they must be identical.
 */
const SHARED_VECTORS = path.resolve(repoRoot, '../shared/vectors/progress.json');
const VECTORS_COPY = path.resolve(import.meta.dirname, 'progress.vectors.json');
const VECTORS = fs.existsSync(SHARED_VECTORS) ? SHARED_VECTORS : VECTORS_COPY;

interface VectorCase {
  name: string;
  timezone: string;
  window: { startsAt: string; endsAt: string } | null;
  now: string;
  intervals: { start: string; stop: string | null }[];
  expect: ProgressMetrics;
}

const ms = (iso: string) => {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) throw new Error(`bad time ${iso}`);
  return t;
};

function inputOf(c: Omit<VectorCase, 'name' | 'expect'>): ProgressInput {
  return {
    timezone: c.timezone,
    now: ms(c.now),
    startsAt: c.window ? ms(c.window.startsAt) : null,
    endsAt: c.window ? ms(c.window.endsAt) : null,
    intervals: c.intervals.map((i) => ({ start: ms(i.start), stop: i.stop === null ? null : ms(i.stop) })),
  };
}

const single = {
  totalMinutes,
  singleSessionMinutes,
  uniqueDays,
  streakDays,
  sessionCount,
} satisfies Record<keyof ProgressMetrics, (input: ProgressInput) => number>;

function expectExactly(input: ProgressInput, expected: ProgressMetrics) {
  expect(computeProgress(input)).toEqual(expected);
  // Each rule on its own gives the same value as the combined computation.
  for (const rule of RULE_TYPES)
    expect({ rule, value: single[rule](input) }).toEqual({ rule, value: expected[rule] });
}

describe('shared reference vectors (../shared/vectors/progress.json)', () => {
  const file = JSON.parse(fs.readFileSync(VECTORS, 'utf8')) as { cases: VectorCase[] };

  it('the copy in the repository is the shared file', () => {
    if (fs.existsSync(SHARED_VECTORS)) {
      expect(fs.readFileSync(VECTORS_COPY, 'utf8')).toBe(fs.readFileSync(SHARED_VECTORS, 'utf8'));
    } else {
      expect(VECTORS).toBe(VECTORS_COPY);
    }
  });

  it('has cases', () => {
    expect(file.cases.length).toBeGreaterThan(0);
  });

  it.each(file.cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    expectExactly(inputOf(c), c.expect);
  });
});

const day = (
  timezone: string,
  intervals: [string, string | null][],
  now: string,
  window: [string, string] | null = null,
) =>
  inputOf({
    timezone,
    now,
    window: window ? { startsAt: window[0], endsAt: window[1] } : null,
    intervals: intervals.map(([start, stop]) => ({ start, stop })),
  });

const m = (
  totalMinutes: number,
  singleSessionMinutes: number,
  uniqueDays: number,
  streakDays: number,
  sessionCount: number,
): ProgressMetrics => ({ totalMinutes, singleSessionMinutes, uniqueDays, streakDays, sessionCount });

describe('own cases', () => {
  const cases: [string, ProgressInput, ProgressMetrics][] = [
    [
      'Los Angeles spring forward: the 23-hour day ends at 07:00 UTC',
      day('America/Los_Angeles', [['2026-03-09T06:30:00Z', '2026-03-09T07:30:00Z']], '2026-03-10T00:00:00Z'),
      m(60, 60, 2, 2, 1),
    ],
    [
      'Los Angeles: a stream across the skipped hour lasts its real 60 minutes',
      day('America/Los_Angeles', [['2026-03-08T09:30:00Z', '2026-03-08T10:30:00Z']], '2026-03-10T00:00:00Z'),
      m(60, 60, 1, 1, 1),
    ],
    [
      'Los Angeles fall back: 23:15 on the 25-hour day is still that day',
      day(
        'America/Los_Angeles',
        [
          ['2026-10-31T18:00:00Z', '2026-10-31T18:05:00Z'],
          ['2026-11-02T07:15:00Z', '2026-11-02T07:45:00Z'],
          ['2026-11-02T20:00:00Z', '2026-11-02T20:02:00Z'],
        ],
        '2026-11-03T00:00:00Z',
      ),
      m(37, 30, 3, 3, 3),
    ],
    [
      'Berlin spring forward: the day ends at 22:00 UTC',
      day('Europe/Berlin', [['2026-03-29T21:30:00Z', '2026-03-29T22:30:00Z']], '2026-03-31T00:00:00Z'),
      m(60, 60, 2, 2, 1),
    ],
    [
      'Berlin fall back: 23:10–23:50 local on the 25-hour day is one day',
      day('Europe/Berlin', [['2026-10-25T22:10:00Z', '2026-10-25T22:50:00Z']], '2026-10-27T00:00:00Z'),
      m(40, 40, 1, 1, 1),
    ],
    [
      'Berlin fall back: the repeated hour is counted in real time, not twice',
      day('Europe/Berlin', [['2026-10-25T00:30:00Z', '2026-10-25T01:30:00Z']], '2026-10-27T00:00:00Z'),
      m(60, 60, 1, 1, 1),
    ],
    [
      'across midnight: 30 s before midnight do not make a day',
      day('UTC', [['2026-01-05T23:59:30Z', '2026-01-06T00:05:00Z']], '2026-01-07T00:00:00Z'),
      m(5, 5, 1, 1, 1),
    ],
    [
      'across midnight in Berlin: 23:30 UTC is already the next local day',
      day('Europe/Berlin', [['2026-01-05T22:30:00Z', '2026-01-05T23:30:00Z']], '2026-01-07T00:00:00Z'),
      m(60, 60, 2, 2, 1),
    ],
    [
      'back-to-back intervals across midnight are one span',
      day(
        'UTC',
        [
          ['2026-01-05T23:59:30Z', '2026-01-06T00:00:00Z'],
          ['2026-01-05T23:59:00Z', '2026-01-05T23:59:30Z'],
          ['2026-01-06T00:00:00Z', '2026-01-06T00:00:59Z'],
        ],
        '2026-01-07T00:00:00Z',
      ),
      m(1, 0, 1, 1, 0),
    ],
    [
      'a streak continued over four days',
      day(
        'UTC',
        [
          ['2026-01-01T08:00:00Z', '2026-01-01T08:01:00Z'],
          ['2026-01-02T23:00:00Z', '2026-01-02T23:01:00Z'],
          ['2026-01-03T00:30:00Z', '2026-01-03T00:31:00Z'],
          ['2026-01-04T12:00:00Z', '2026-01-04T12:10:00Z'],
        ],
        '2026-01-05T00:00:00Z',
      ),
      m(13, 10, 4, 4, 4),
    ],
    [
      'a broken streak: the later, longer run wins',
      day(
        'UTC',
        [
          ['2026-01-01T08:00:00Z', '2026-01-01T08:02:00Z'],
          ['2026-01-02T08:00:00Z', '2026-01-02T08:02:00Z'],
          ['2026-01-04T08:00:00Z', '2026-01-04T08:02:00Z'],
          ['2026-01-05T08:00:00Z', '2026-01-05T08:02:00Z'],
          ['2026-01-06T08:00:00Z', '2026-01-06T08:02:00Z'],
        ],
        '2026-01-07T00:00:00Z',
      ),
      m(10, 2, 5, 3, 5),
    ],
    [
      'a day with only 59 s breaks a streak',
      day(
        'UTC',
        [
          ['2026-01-01T08:00:00Z', '2026-01-01T08:02:00Z'],
          ['2026-01-02T08:00:00Z', '2026-01-02T08:00:59Z'],
          ['2026-01-03T08:00:00Z', '2026-01-03T08:02:00Z'],
        ],
        '2026-01-07T00:00:00Z',
      ),
      m(4, 2, 2, 1, 2),
    ],
    [
      'exactly 60 s is a stream session and a day',
      day('UTC', [['2026-01-01T08:00:00Z', '2026-01-01T08:01:00Z']], '2026-01-07T00:00:00Z'),
      m(1, 1, 1, 1, 1),
    ],
    [
      'a stream inside another counts once',
      day(
        'UTC',
        [
          ['2026-01-01T08:10:00Z', '2026-01-01T08:20:00Z'],
          ['2026-01-01T08:00:00Z', '2026-01-01T09:00:00Z'],
        ],
        '2026-01-07T00:00:00Z',
      ),
      m(60, 60, 1, 1, 2),
    ],
    [
      'a live stream is clipped at the window end',
      day('UTC', [['2026-02-02T23:00:00Z', null]], '2026-02-05T00:00:00Z', [
        '2026-02-01T00:00:00Z',
        '2026-02-03T00:00:00Z',
      ]),
      m(60, 60, 1, 1, 1),
    ],
    [
      'a window that has not begun counts nothing',
      day('UTC', [['2026-01-01T08:00:00Z', null]], '2026-01-02T00:00:00Z', [
        '2026-02-01T00:00:00Z',
        '2026-02-03T00:00:00Z',
      ]),
      m(0, 0, 0, 0, 0),
    ],
    [
      'a live stream with other closed streams, overlapping',
      day(
        'UTC',
        [
          ['2026-01-07T08:00:00Z', '2026-01-07T09:00:00Z'],
          ['2026-01-07T08:30:00Z', null],
        ],
        '2026-01-07T09:30:30Z',
      ),
      m(90, 60, 1, 1, 2),
    ],
    [
      'Santiago: the day whose midnight is skipped begins at 01:00 local',
      day('America/Santiago', [['2026-09-06T03:59:00Z', '2026-09-06T04:01:00Z']], '2026-09-07T00:00:00Z'),
      m(2, 2, 2, 2, 1),
    ],
    ['no intervals', day('UTC', [], '2026-01-07T00:00:00Z'), m(0, 0, 0, 0, 0)],
  ];

  it.each(cases)('%s', (_name, input, expected) => {
    expectExactly(input, expected);
  });
});

describe('local days', () => {
  it('canonical time zone names', () => {
    expect(canonicalTimeZone('UTC')).toBe('UTC');
    expect(canonicalTimeZone('america/los_angeles')).toBe('America/Los_Angeles');
    expect(canonicalTimeZone('Europe/Berlin')).toBe('Europe/Berlin');
    for (const bad of ['', 'Mars/Olympus', '+02:00', 'Europe/../etc', 'UTC+1', 'x'.repeat(100)]) {
      expect(canonicalTimeZone(bad)).toBeNull();
    }
  });

  it('each day begins where the previous ends, every day of a year, in zones with odd days', () => {
    const zones = ['UTC', 'America/Los_Angeles', 'Europe/Berlin', 'America/Santiago', 'Australia/Lord_Howe'];
    for (const zone of zones) {
      const first = Date.UTC(2026, 0, 1) / DAY_MS;
      for (let d = first; d < first + 366; d++) {
        const start = startOfLocalDay(d, zone);
        expect(localDay(start, zone)).toBe(d);
        expect(localDay(start - 1, zone)).toBe(d - 1);
        const next = startOfLocalDay(d + 1, zone);
        // 23 to 25 hours (Lord Howe moves by 30 minutes).
        expect(next - start).toBeGreaterThanOrEqual(23 * 3_600_000);
        expect(next - start).toBeLessThanOrEqual(25 * 3_600_000);
      }
    }
  });

  it('longest run of consecutive days', () => {
    expect(longestRun([])).toBe(0);
    expect(longestRun([5])).toBe(1);
    expect(longestRun([1, 2, 3, 5, 6])).toBe(3);
    expect(longestRun([1, 3, 4, 5, 6, 9])).toBe(4);
  });
});
