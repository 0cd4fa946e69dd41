import type { Clock } from '../../clock.ts';
import type { PageRequest } from '../../http/pagination.ts';
import type { Storage } from '../../storage/index.ts';
import type { DevicePrincipal } from '../auth/tokens.ts';
import type { EventsService, EventTarget } from '../events/service.ts';
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

/**
 * What other modules add to a session's view: the realtime module knows whether the device is
 * connected, the streams module knows the stream and recording state. Until they are registered
 * a session has no connection and no stream — true, since nothing else can create them.
 */
export interface SessionDecorations {
  connected(sessionId: string): boolean;
  stream(sessionId: string): Promise<{ stream: StreamView; recording: RecordingView }>;
}

const IDLE = {
  stream: { state: 'idle', streamingSessionId: null, resolution: null, aspectratio: null, startedAt: null },
  recording: { state: 'idle', recordingId: null, startedAt: null },
} as const satisfies { stream: StreamView; recording: RecordingView };

export class SessionsService {
  private decorations: SessionDecorations = { connected: () => false, stream: async () => IDLE };

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly events: EventsService,
  ) {
    // Device batches move lastSeenAt in the same transaction as the events.
    events.writer.addTransactionHook(async (trx, group) => {
      for (const [sessionId, at] of group.contacts) await store.touchSession(trx, sessionId, at);
    });
  }

  decorate(decorations: SessionDecorations) {
    this.decorations = decorations;
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

  /** Records device contact. */
  async touch(sessionId: string) {
    await store.touchSession(this.storage.db, sessionId, this.clock.now());
  }

  async eventTarget(row: SessionRow): Promise<EventTarget> {
    const { stream } = await this.decorations.stream(row.session_id);
    return {
      sessionId: row.session_id,
      tenantId: row.tenant_id,
      streamingSessionId:
        stream.state === 'streaming' || stream.state === 'stopping' ? stream.streamingSessionId : null,
    };
  }

  /**
   * Ends a live session and emits `SessionEnd` (unless the device already sent one).
   * Ending an ended session changes nothing and returns it as it is.
   */
  async end(row: SessionRow, reason: string, options: { emit: boolean; endedAt?: number } = { emit: true }) {
    const endedAt = options.endedAt ?? this.clock.now();
    const ended = await store.endSession(this.storage.db, row.session_id, endedAt, reason);
    if (!ended) return (await store.findSession(this.storage.db, row.tenant_id, row.session_id)) ?? row;
    if (options.emit) await this.emitSessionEnd(ended);
    return ended;
  }

  /** Ends sessions without device contact for the idle timeout; returns how many it ended. */
  async sweepIdle(idleTimeoutMs: number): Promise<number> {
    const ended = await store.endIdleSessions(this.storage.db, this.clock.now() - idleTimeoutMs);
    for (const row of ended) await this.emitSessionEnd(row);
    return ended.length;
  }

  private async emitSessionEnd(row: SessionRow) {
    const duration = Math.max(0, Math.round(((row.ended_at ?? row.last_seen_at) - row.started_at) / 1000));
    await this.events.emit(await this.eventTarget(row), 'SessionEnd', { duration, reason: row.end_reason });
  }

  list(filter: store.SessionFilter, page: PageRequest) {
    return store.listSessions(this.storage.db, filter, page);
  }

  async view(row: SessionRow) {
    const { stream, recording } = await this.decorations.stream(row.session_id);
    return {
      sessionId: row.session_id,
      tenantCohortId: row.tenant_cohort_id,
      playerId: row.player_id,
      device: JSON.parse(row.device) as Record<string, string>,
      status: row.status as 'live' | 'ended',
      connected: this.decorations.connected(row.session_id),
      startedAt: row.started_at,
      lastSeenAt: row.last_seen_at,
      endedAt: row.ended_at,
      endReason: row.end_reason,
      stream,
      recording,
    };
  }
}
