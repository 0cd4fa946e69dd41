/**
 * Live data for the console. Pages subscribe to a `Feed` and never know how it is kept current.
 * Today every feed polls the tenant API (sessions and commands every 1.5 s, events every 1.5 s
 * from an overlapping window). The live tail of CONTRACT §11 (Server-Sent Events) can replace a
 * poller behind the same interface: `sessionEventsFeed` would read `GET /sessions/{id}/events/stream`
 * and `activeSessionsFeed` would apply `session.started`/`session.ended`/`device.*` presence events,
 * without a change to the pages.
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import { type ApiError, asApiError, ok } from '../shared/problem.ts';
import type { Api } from './auth.ts';

export interface Feed<T> {
  /** Starts the feed; `onData` gets every new value, `onError` every failure. Returns the stop function. */
  subscribe(onData: (value: T) => void, onError: (error: ApiError) => void): () => void;
  /** Asks for fresh data now (after the page changed something). */
  refresh(): void;
}

export const POLL_MS = 1500;

/** A feed that calls `load` every `intervalMs` (one call at a time), and at once on `refresh()`. */
export function pollingFeed<T>(load: () => Promise<T>, intervalMs = POLL_MS): Feed<T> {
  let wake: (() => void) | null = null;
  let again = false;
  return {
    subscribe(onData, onError) {
      let stopped = false;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const run = async () => {
        if (stopped) return;
        again = false;
        try {
          const value = await load();
          if (!stopped) onData(value);
        } catch (err) {
          if (!stopped) onError(asApiError(err));
        }
        if (stopped) return;
        if (again) return void run();
        timer = setTimeout(run, intervalMs);
        wake = () => {
          clearTimeout(timer);
          wake = null;
          void run();
        };
      };
      void run();
      return () => {
        stopped = true;
        clearTimeout(timer);
        wake = null;
      };
    },
    refresh() {
      if (wake) wake();
      else again = true;
    },
  };
}

export interface FeedState<T> {
  data: T | undefined;
  error: ApiError | null;
  feed: Feed<T>;
}

/** Subscribes while the component is mounted; a new feed whenever `deps` change. */
export function useFeed<T>(make: () => Feed<T>, deps: unknown[]): FeedState<T> {
  const feed = useMemo(make, deps);
  const [state, setState] = useState<{ data: T | undefined; error: ApiError | null }>({
    data: undefined,
    error: null,
  });
  useEffect(() => {
    setState({ data: undefined, error: null });
    return feed.subscribe(
      (data) => setState({ data, error: null }),
      (error) => setState((s) => ({ data: s.data, error })),
    );
  }, [feed]);
  return { ...state, feed };
}

// ---------------------------------------------------------------------------------------------
// Sessions

type Schemas = import('@liveline/tenant').components['schemas'];
export type Session = Schemas['Session'];
export type Command = Schemas['Command'];

/** A stored event as the API returns it. */
export interface StoredEvent {
  id: string;
  eventType: string;
  timestamp: number;
  sessionId?: string;
  streamingSessionId?: string;
  [field: string]: unknown;
}

export interface Health {
  fps: number | null;
  batteryLevel: number | null;
  at: number;
}

export interface SessionsView {
  sessions: Session[];
  page: number;
  totalPages: number;
  totalCount: number;
  /** False when the server stopped counting (`totalCount` is then a floor, e.g. 10,000). */
  totalCountExact: boolean;
  /** The latest Health event of each listed session (by sessionId), when it sent one. */
  health: Record<string, Health>;
  at: number;
}

/** How far back the table looks for a session's latest Health event when it first lists it. */
const HEALTH_LOOKBACK_MS = 30 * 60_000;

/**
 * The latest Health event of each listed session, fetched incrementally: each poll asks only for
 * Health events from the last one seen.
 */
class HealthIndex {
  private latest = new Map<string, Health & { id: string }>();

  async refresh(api: Api, sessions: Session[]) {
    const now = Date.now();
    await Promise.all(
      sessions.map(async (s) => {
        const known = this.latest.get(s.sessionId);
        let from = known ? known.at : Math.max(0, now - HEALTH_LOOKBACK_MS);
        for (let pages = 0; pages < 10; pages++) {
          const page = await ok(
            api.tenant.GET('/sessions/{SessionId}/events', {
              params: { path: { SessionId: s.sessionId }, query: { eventType: 'Health', from, limit: 1000 } },
            }),
          );
          const events = page.events as unknown as StoredEvent[];
          const last = events[events.length - 1];
          if (last) {
            this.latest.set(s.sessionId, {
              id: last.id,
              at: last.timestamp,
              fps: typeof last.fps === 'number' ? last.fps : null,
              batteryLevel: typeof last.batteryLevel === 'number' ? last.batteryLevel : null,
            });
          }
          if (!page.hasMore || !last) break;
          from = last.timestamp;
        }
      }),
    );
    const listed = new Set(sessions.map((s) => s.sessionId));
    for (const id of this.latest.keys()) if (!listed.has(id)) this.latest.delete(id);
    return Object.fromEntries(this.latest);
  }
}

export interface SessionsQuery {
  cohort: string;
  minutes: number;
  page: number;
  pageSize: number;
}

/** The `Live sessions` table: the active sessions (of a cohort), one page, with their latest health. */
export function activeSessionsFeed(api: Api, q: SessionsQuery): Feed<SessionsView> {
  const health = new HealthIndex();
  return pollingFeed(async () => {
    const query = { minutes: q.minutes, pageSize: q.pageSize };
    const page = q.cohort
      ? await ok(
          api.tenant.GET('/cohorts/{TenantCohortId}/active/page/{pageNumber}', {
            params: { path: { TenantCohortId: q.cohort, pageNumber: q.page }, query },
          }),
        )
      : await ok(
          api.tenant.GET('/sessions/active/page/{pageNumber}', {
            params: { path: { pageNumber: q.page }, query },
          }),
        );
    return {
      sessions: page.sessions,
      // Read by page number, never by cursor: the page is the one asked for.
      page: page.page ?? q.page,
      totalPages: page.totalPages,
      totalCount: page.totalCount,
      totalCountExact: page.totalCountExact,
      health: await health.refresh(api, page.sessions),
      at: Date.now(),
    };
  });
}

// ---------------------------------------------------------------------------------------------
// One session

/** The session's state (stream, recording, connection). */
export function sessionFeed(api: Api, sessionId: string): Feed<Session> {
  return pollingFeed(async () => {
    const session = await ok(
      api.tenant.GET('/sessions/{SessionId}', { params: { path: { SessionId: sessionId } } }),
    );
    // The full answer carries every event; the page keeps only the state (events come from their feed).
    const { events: _events, ...state } = session as Session & { events?: unknown };
    return state as Session;
  }, 5000);
}

export interface EventsView {
  /** Newest first, at most `MAX_EVENTS_SHOWN`. */
  events: StoredEvent[];
  /** Every Health event seen, oldest first (at most `MAX_HEALTH_POINTS`), for the chart. */
  health: StoredEvent[];
  /** Older events exist that are not shown (only the newest `MAX_EVENTS_SHOWN` are). */
  truncated: boolean;
}

const MAX_EVENTS_SHOWN = 500;
const MAX_HEALTH_POINTS = 5000;
/** Events are ordered by the device's timestamps, which may arrive late: each poll re-reads this window. */
const OVERLAP_MS = 120_000;
const MAX_INITIAL_PAGES = 20;

/** A session's events: first everything stored (up to 20,000), then new ones as they arrive. */
export function sessionEventsFeed(api: Api, sessionId: string): Feed<EventsView> {
  const byId = new Map<string, StoredEvent>();
  let newest = 0;
  let loaded = false;
  let truncated = false;
  const readPages = async (from: number | undefined, maxPages: number) => {
    let after: string | undefined;
    for (let i = 0; i < maxPages; i++) {
      const query = { limit: 1000, ...(from === undefined ? {} : { from }), ...(after ? { after } : {}) };
      const page = await ok(
        api.tenant.GET('/sessions/{SessionId}/events', { params: { path: { SessionId: sessionId }, query } }),
      );
      for (const e of page.events as unknown as StoredEvent[]) {
        byId.set(e.id, e);
        if (e.timestamp > newest) newest = e.timestamp;
      }
      if (!page.hasMore || !page.nextCursor) return;
      after = page.nextCursor;
    }
  };
  return pollingFeed(async () => {
    if (!loaded) {
      await readPages(undefined, MAX_INITIAL_PAGES);
      loaded = true;
    } else {
      await readPages(Math.max(0, newest - OVERLAP_MS), MAX_INITIAL_PAGES);
    }
    const all = [...byId.values()].sort((a, b) => a.timestamp - b.timestamp || (a.id < b.id ? -1 : 1));
    // Keep memory bounded: what is not shown is forgotten, except the chart's points.
    const health = all.filter((e) => e.eventType === 'Health').slice(-MAX_HEALTH_POINTS);
    const shown = all.slice(-MAX_EVENTS_SHOWN);
    if (all.length > shown.length) truncated = true;
    const keep = new Set([...shown, ...health]);
    for (const e of all) if (!keep.has(e)) byId.delete(e.id);
    return { events: shown.reverse(), health, truncated };
  });
}

/** The session's commands, newest first (the latest 100). */
export function commandsFeed(api: Api, sessionId: string): Feed<Command[]> {
  return pollingFeed(async () => {
    const page = await ok(
      api.tenant.GET('/sessions/{SessionId}/realtime/commands/page/{pageNumber}', {
        params: { path: { SessionId: sessionId, pageNumber: 1 }, query: { pageSize: 100 } },
      }),
    );
    return page.commands;
  });
}
