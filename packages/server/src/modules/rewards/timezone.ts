/**
 * Calendar days in an IANA time zone, from the platform's time zone data (Intl): which local day an
 * instant falls on, and the instant a local day begins (23, 24 or 25 hours after the one before,
 * around DST changes). Days are numbered like Unix days: `Date.UTC(y, m - 1, d) / DAY_MS`, so
 * consecutive days differ by one.
 */

export const DAY_MS = 86_400_000;

const IANA_NAME = /^(UTC|[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)+|[A-Za-z]{2,}[A-Za-z0-9_+-]*)$/;
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      era: 'short',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/**
 * The canonical spelling of an IANA time zone name (`america/los_angeles` → `America/Los_Angeles`),
 * or null when the platform does not know it. Offsets such as `+02:00` are not zone names.
 */
export function canonicalTimeZone(name: string): string | null {
  if (name.length > 64 || !IANA_NAME.test(name)) return null;
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

interface WallClock {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

function wallClock(t: number, timeZone: string): WallClock {
  const out: WallClock = { year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
  let bc = false;
  for (const p of formatter(timeZone).formatToParts(new Date(t))) {
    if (p.type === 'era') bc = p.value.startsWith('B');
    else if (p.type in out) out[p.type as keyof WallClock] = Number(p.value);
  }
  if (bc) out.year = 1 - out.year;
  return out;
}

/** The local calendar day (a day number) of instant `t` in `timeZone`. */
export function localDay(t: number, timeZone: string): number {
  const w = wallClock(t, timeZone);
  return Date.UTC(w.year, w.month - 1, w.day) / DAY_MS;
}

/** Local wall-clock time minus UTC at instant `t`, in ms. */
function offsetAt(t: number, timeZone: string): number {
  const w = wallClock(t, timeZone);
  const whole = Math.floor(t / 1000) * 1000;
  return Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second) - whole;
}

/**
 * The first instant of local day `day` in `timeZone`: usually local midnight; where a DST change
 * skips midnight, the first instant that is on that day.
 */
export function startOfLocalDay(day: number, timeZone: string): number {
  const wall = day * DAY_MS;
  // Local midnight = wall − offset, where the offset is the one in force then: two rounds settle it.
  let t = wall - offsetAt(wall, timeZone);
  t = wall - offsetAt(t, timeZone);
  if (localDay(t, timeZone) === day && localDay(t - 1, timeZone) < day) return t;
  // Midnight does not exist that day (or the zone is otherwise odd): search for the first instant.
  let lo = wall - 2 * DAY_MS; // surely before the day
  let hi = wall + 2 * DAY_MS; // surely on or after it
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (localDay(mid, timeZone) >= day) hi = mid;
    else lo = mid;
  }
  return hi;
}
