import type { Kysely } from 'kysely';
import type { Clock } from '../../clock.ts';
import type { PageRequest } from '../../http/pagination.ts';
import { NotedTimes } from '../../noted-times.ts';
import type { Signals } from '../../signals.ts';
import type { Database, Storage } from '../../storage/index.ts';
import type { DevicePrincipal, Principal } from '../auth/index.ts';
import type { EventSession, EventsService } from '../events/index.ts';
import type { SessionRow } from './store.ts';
import * as store from './store.ts';

export type { SessionRow };

export interface StreamView {
  state: 'idle' | 'starting' | 'streaming' | 'stopping';
  streamingSessionId: string | null;
  resolution: number | null;
  aspectratio: number | null;
  startedAt: number | null;
}

export interface RecordingView {
  state: 'idle' | 'starting' | 'recording' | 'stopping';
  recordingId: string | null;
  startedAt: number | null;
}

/** What a session is doing right now, beyond its row: known to the realtime and streams modules. */
export interface SessionLiveState {
  connected: boolean;
  stream: StreamView;
  recording: RecordingView;
}

/**
 * A module that knows part of a session's live state registers one of these: the realtime module
 * knows whether the device is connected, the streams module the stream and recording. Until they
 * register, a session has no connection and an idle stream — true, since nothing else makes them.
 */
export type SessionDecorator = (sessionIds: string[]) => Promise<Map<string, Partial<SessionLiveState>>>;

const IDLE_STREAM: StreamView = {
  state: 'idle',
  streamingSessionId: null,
  resolution: null,
  aspectratio: null,
  startedAt: null,
};
const IDLE_RECORDING: RecordingView = { state: 'idle', recordingId: null, startedAt: null };

/** Sessions whose contact times are written by one statement. */
const CONTACTS_PER_STATEMENT = 500;

export class SessionsService {
  private readonly decorators: SessionDecorator[] = [];
  /** Socket contact not yet written: session → latest contact time. */
  private readonly contacts = new NotedTimes(1000);

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly events: EventsService,
    private readonly signals: Signals,
  ) {}

  addDecorator(decorator: SessionDecorator) {
    this.decorators.push(decorator);
  }

  async liveStates(sessionIds: string[]): Promise<Map<string, SessionLiveState>> {
    const out = new Map<string, SessionLiveState>();
    for (const id of sessionIds)
      out.set(id, { connected: false, stream: IDLE_STREAM, recording: IDLE_RECORDING });
    const parts = await Promise.all(this.decorators.map((d) => d(sessionIds)));
    for (const part of parts) {
      for (const [id, state] of part) {
        const current = out.get(id);
        if (current) out.set(id, { ...current, ...state });
      }
    }
    return out;
  }

  create(principal: DevicePrincipal, body: { tenantCohortId?: string; device?: Record<string, string> }) {
    return store.insertSession(this.storage.db, {
      tenantId: principal.tenantId,
      playerId: principal.playerId,
      // A cohort in the token wins over one in the body.
      tenantCohortId: principal.tenantCohortId ?? body.tenantCohortId ?? null,
      device: body.device ?? {},
      now: this.clock.now(),
    });
  }

  async findForTenant(tenantId: string, sessionId: string) {
    return (await store.findSession(this.storage.db, tenantId, sessionId)) ?? null;
  }

  /** A device sees only its own player's sessions. */
  async findForDevice(principal: DevicePrincipal, sessionId: string) {
    const row = await store.findSession(this.storage.db, principal.tenantId, sessionId);
    return row && row.player_id === principal.playerId ? row : null;
  }

  /** The session a request names, if its principal may see it (a device: only its own player's). */
  async findForPrincipal(principal: Principal | null, sessionId: string): Promise<SessionRow | null> {
    if (principal?.kind === 'device') return this.findForDevice(principal, sessionId);
    if (principal?.kind === 'tenant') return this.findForTenant(principal.tenantId, sessionId);
    return null;
  }

  /** Records device contact. */
  async touch(sessionId: string) {
    await store.touchSession(this.storage.db, sessionId, this.clock.now());
  }

  /** Records device contact of many sessions inside the caller's transaction (in the given order). */
  async touchAll(trx: Kysely<Database>, contacts: Map<string, number>) {
    for (const [sessionId, at] of contacts) await store.touchSession(trx, sessionId, at);
  }

  /**
   * Ends a live session and emits `SessionEnd` (unless the device already sent one).
   * Ending an ended session changes nothing and returns it as it is.
   */
  async end(row: SessionRow, reason: string, options: { emit: boolean; endedAt?: number } = { emit: true }) {
    const endedAt = options.endedAt ?? this.clock.now();
    const ended = await store.endSession(this.storage.db, row.session_id, endedAt, reason);
    if (!ended) return (await store.findSession(this.storage.db, row.tenant_id, row.session_id)) ?? row;
    await this.afterEnd(ended, options.emit);
    return ended;
  }

  /** Ends sessions without device contact for the idle timeout; returns how many it ended. */
  /**
   * Records device contact over the socket without a write of its own: `flushContacts` (a job,
   * every second) writes every session's latest contact in a few statements, however many sockets.
   */
  noteContact(sessionId: string) {
    this.contacts.note(sessionId, this.clock.now());
  }

  /** Writes the contact noted since the last flush: one statement per second of contact times. */
  async flushContacts(): Promise<number> {
    if (this.contacts.size === 0) return 0;
    // lastSeenAt is kept to the second here (the hub notes a socket's contact once a second at most).
    const bySecond = this.contacts.take();
    let written = 0;
    for (const [at, ids] of bySecond) {
      for (let i = 0; i < ids.length; i += CONTACTS_PER_STATEMENT) {
        await store.touchSessions(this.storage.db, ids.slice(i, i + CONTACTS_PER_STATEMENT), at);
      }
      written += ids.length;
    }
    return written;
  }

  async sweepIdle(idleTimeoutMs: number): Promise<number> {
    // Contact noted but not yet written must not let a connected session look idle.
    await this.flushContacts();
    const ended = await store.endIdleSessions(this.storage.db, this.clock.now() - idleTimeoutMs);
    for (const row of ended) await this.afterEnd(row, true);
    return ended.length;
  }

  /** Other modules wind down first (a live stream stops), then the session's own SessionEnd. */
  private async afterEnd(row: SessionRow, emit: boolean) {
    await this.signals.emit('session.ended', {
      sessionId: row.session_id,
      tenantId: row.tenant_id,
      endedAt: row.ended_at ?? this.clock.now(),
      reason: row.end_reason ?? 'device',
    });
    if (emit) await this.emitSessionEnd(row);
  }

  private async emitSessionEnd(row: SessionRow) {
    const duration = Math.max(0, Math.round(((row.ended_at ?? row.last_seen_at) - row.started_at) / 1000));
    await this.events.emit(
      eventSession(row),
      'SessionEnd',
      { duration, reason: row.end_reason },
      row.ended_at ?? undefined,
    );
  }

  list(filter: store.SessionFilter, page: PageRequest) {
    return store.listSessions(this.storage.db, filter, page);
  }

  async view(row: SessionRow) {
    return (await this.views([row]))[0];
  }

  async views(rows: SessionRow[]) {
    const live = await this.liveStates(rows.map((r) => r.session_id));
    return rows.map((row) => {
      const state = live.get(row.session_id)!;
      return {
        sessionId: row.session_id,
        tenantCohortId: row.tenant_cohort_id,
        playerId: row.player_id,
        device: JSON.parse(row.device) as Record<string, string>,
        status: row.status as 'live' | 'ended',
        connected: state.connected,
        startedAt: row.started_at,
        lastSeenAt: row.last_seen_at,
        endedAt: row.ended_at,
        endReason: row.end_reason,
        stream: state.stream,
        recording: state.recording,
      };
    });
  }
}

/** A session as the events module knows it. */
export function eventSession(row: SessionRow): EventSession {
  return { sessionId: row.session_id, tenantId: row.tenant_id, tenantCohortId: row.tenant_cohort_id };
}
