/**
 * Live data for the console. Pages subscribe to a `Feed` and never know how it is kept current.
 * The live sessions table and a session's events follow the live tail (CONTRACT §11, through the
 * tenant client's `tail()`): presence and state events make the table read its page again, Health
 * events update the battery and fps columns in place, and a session's events arrive as they are
 * stored. When the tail cannot be had (refused, or failing), they poll as before. A session's state
 * and its commands are polled (commands are not on the tail).
 */
import { PRESENCE_KINDS, type TailMessage, type TailOptions, type TailTarget } from '@liveline/tenant';
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
/** While the tail is live, a page is still read again this often (for what the tail does not carry). */
export const TAIL_FALLBACK_POLL_MS = 15_000;

/**
 * A feed that calls `load` every `intervalMs` (one call at a time; a function is asked before each
 * wait), and at once on `refresh()`.
 */
export function pollingFeed<T>(
  load: () => Promise<T>,
  intervalMs: number | (() => number) = POLL_MS,
): Feed<T> {
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
        timer = setTimeout(run, typeof intervalMs === 'function' ? intervalMs() : intervalMs);
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
// The live tail

export interface TailHandlers {
  /** The stream is open (again, after a reconnect). */
  open(): void;
  message(m: TailMessage): void;
  /** The tail ended for good (refused, or the tenant client gave up): the feed falls back to polling. */
  failed(error: unknown): void;
}

/** Follows a tail in the background until the returned stop function is called. */
export function followTail(api: Api, target: TailTarget, options: TailOptions, on: TailHandlers): () => void {
  const controller = new AbortController();
  void (async () => {
    try {
      for await (const m of api.tenant.tail(target, {
        ...options,
        signal: controller.signal,
        onOpen: () => on.open(),
        // Reconnecting without a word is fine; a tail down for long polls meanwhile (see `live`).
        maxRetryMs: 10_000,
      })) {
        on.message(m);
      }
    } catch (err) {
      if (!controller.signal.aborted) on.failed(err);
    }
  })();
  return () => controller.abort();
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
  /** Kept current by the live tail (else polled). */
  live: boolean;
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
  /** Sessions already looked up: while the tail is live, their Health events come from it. */
  private looked = new Set<string>();

  /** A Health event from the tail. */
  note(e: StoredEvent) {
    const known = this.latest.get(String(e.sessionId));
    if (known && known.at > e.timestamp) return;
    this.latest.set(String(e.sessionId), {
      id: e.id,
      at: e.timestamp,
      fps: typeof e.fps === 'number' ? e.fps : null,
      batteryLevel: typeof e.batteryLevel === 'number' ? e.batteryLevel : null,
    });
  }

  snapshot() {
    return Object.fromEntries(this.latest);
  }

  /** Reads the Health events of the listed sessions: only those not looked up yet when `live`. */
  async refresh(api: Api, sessions: Session[], live = false) {
    const now = Date.now();
    await Promise.all(
      sessions.map(async (s) => {
        if (live && this.looked.has(s.sessionId)) return;
        this.looked.add(s.sessionId);
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
          if (last) this.note({ ...last, sessionId: s.sessionId });
          if (!page.hasMore || !last) break;
          from = last.timestamp;
        }
      }),
    );
    const listed = new Set(sessions.map((s) => s.sessionId));
    for (const id of this.latest.keys()) if (!listed.has(id)) this.latest.delete(id);
    for (const id of this.looked) if (!listed.has(id)) this.looked.delete(id);
    return this.snapshot();
  }
}

export interface SessionsQuery {
  cohort: string;
  minutes: number;
  page: number;
  pageSize: number;
}

/** Events that change what the table shows of a session (its state), besides presence. */
const STATE_EVENT_TYPES = [
  'StreamStarted',
  'StreamStopped',
  'RecordingStarted',
  'RecordingStopped',
  'SessionEnd',
];

/**
 * The `Live sessions` table: the active sessions (of a cohort), one page, with their latest health.
 * The page is read again when the tail brings a presence change or a state event (and every 15 s
 * for the rest); Health events update the figures in place. Without a tail it polls every 1.5 s.
 */
export function activeSessionsFeed(api: Api, q: SessionsQuery): Feed<SessionsView> {
  const health = new HealthIndex();
  let live = false;
  const page = pollingFeed(
    async () => {
      const query = { minutes: q.minutes, pageSize: q.pageSize };
      const answer = q.cohort
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
        sessions: answer.sessions,
        // Read by page number, never by cursor: the page is the one asked for.
        page: answer.page ?? q.page,
        totalPages: answer.totalPages,
        totalCount: answer.totalCount,
        totalCountExact: answer.totalCountExact,
        health: await health.refresh(api, answer.sessions, live),
        live,
        at: Date.now(),
      };
    },
    () => (live ? TAIL_FALLBACK_POLL_MS : POLL_MS),
  );
  return {
    subscribe(onData, onError) {
      let last: SessionsView | undefined;
      const stopPolling = page.subscribe((view) => {
        last = view;
        onData(view);
      }, onError);
      const stopTail = followTail(
        api,
        q.cohort ? { tenantCohortId: q.cohort } : {},
        { eventTypes: [...PRESENCE_KINDS, 'Health', ...STATE_EVENT_TYPES] },
        {
          open() {
            // What happened before the stream opened (or while it was down) is read once.
            live = true;
            page.refresh();
          },
          message(m) {
            if (m.kind !== 'event' || m.eventType !== 'Health') return page.refresh();
            health.note(m.event);
            const listed = last?.sessions.find((s) => s.sessionId === m.event.sessionId);
            if (!last || !listed) return;
            // A Health event is contact: the row's "last seen" moves too.
            const now = Date.now();
            last = {
              ...last,
              sessions: last.sessions.map((s) =>
                s === listed ? { ...s, lastSeenAt: Math.max(s.lastSeenAt ?? 0, now) } : s,
              ),
              health: health.snapshot(),
              at: now,
            };
            onData(last);
          },
          failed() {
            live = false;
            page.refresh();
          },
        },
      );
      return () => {
        stopPolling();
        stopTail();
      };
    },
    refresh: () => page.refresh(),
  };
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
const TAIL_OPEN_TIMEOUT_MS = 5000;

/**
 * A session's events: first everything stored (up to 20,000), then new ones as they arrive. The
 * session's tail is opened first and its history read once it is open, so nothing stored in between
 * is missed (what both bring is merged by id); without a tail it polls a window of the newest events.
 */
export function sessionEventsFeed(api: Api, sessionId: string): Feed<EventsView> {
  const byId = new Map<string, StoredEvent>();
  let newest = 0;
  let truncated = false;
  const add = (e: StoredEvent) => {
    byId.set(e.id, e);
    if (e.timestamp > newest) newest = e.timestamp;
  };
  const readPages = async (from: number | undefined, maxPages: number) => {
    let after: string | undefined;
    for (let i = 0; i < maxPages; i++) {
      const query = { limit: 1000, ...(from === undefined ? {} : { from }), ...(after ? { after } : {}) };
      const page = await ok(
        api.tenant.GET('/sessions/{SessionId}/events', { params: { path: { SessionId: sessionId }, query } }),
      );
      for (const e of page.events as unknown as StoredEvent[]) add(e);
      if (!page.hasMore || !page.nextCursor) return;
      after = page.nextCursor;
    }
  };
  const view = (): EventsView => {
    const all = [...byId.values()].sort((a, b) => a.timestamp - b.timestamp || (a.id < b.id ? -1 : 1));
    // Keep memory bounded: what is not shown is forgotten, except the chart's points.
    const health = all.filter((e) => e.eventType === 'Health').slice(-MAX_HEALTH_POINTS);
    const shown = all.slice(-MAX_EVENTS_SHOWN);
    if (all.length > shown.length) truncated = true;
    const keep = new Set([...shown, ...health]);
    for (const e of all) if (!keep.has(e)) byId.delete(e.id);
    return { events: shown.reverse(), health, truncated };
  };
  let loaded = false;
  const polling = pollingFeed(async () => {
    await readPages(loaded ? Math.max(0, newest - OVERLAP_MS) : undefined, MAX_INITIAL_PAGES);
    loaded = true;
    return view();
  });
  return {
    subscribe(onData, onError) {
      let stopped = false;
      let stopPolling: (() => void) | null = null;
      let pending: ReturnType<typeof setTimeout> | undefined;
      const fallBack = () => {
        if (stopped || stopPolling) return;
        stopTail();
        clearTimeout(pending);
        stopPolling = polling.subscribe(onData, onError);
      };
      // Many events at once make one update.
      const emit = () => {
        if (pending === undefined && loaded) {
          pending = setTimeout(() => {
            pending = undefined;
            if (!stopped && !stopPolling) onData(view());
          }, 50);
        }
      };
      const stopTail = followTail(
        api,
        { sessionId },
        {},
        {
          open() {
            if (loaded) return;
            readPages(undefined, MAX_INITIAL_PAGES).then(
              () => {
                loaded = true;
                if (!stopped && !stopPolling) onData(view());
              },
              (err) => {
                if (stopped) return;
                onError(asApiError(err));
                fallBack();
              },
            );
          },
          message(m) {
            if (m.kind !== 'event') return;
            add(m.event as StoredEvent);
            emit();
          },
          failed: fallBack,
        },
      );
      // A tail that does not open soon (a proxy that holds streams back, say): poll instead.
      const guard = setTimeout(() => {
        if (!loaded) fallBack();
      }, TAIL_OPEN_TIMEOUT_MS);
      return () => {
        stopped = true;
        clearTimeout(pending);
        clearTimeout(guard);
        stopTail();
        stopPolling?.();
      };
    },
    refresh() {
      polling.refresh();
    },
  };
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
