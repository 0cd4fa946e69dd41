import type { Kysely } from 'kysely';
import { Batcher } from '../../batcher.ts';
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

/** Sessions one transaction of the contact flush writes (`flushContacts`). */
const CONTACT_FLUSH_CHUNK = 100;

/**
 * Contacts in session id order, the order every multi-row touch locks rows in: concurrent ingestion
 * groups and the contact flush never deadlock.
 */
function inSessionOrder(contacts: Map<string, number>): [string, number][] {
  return [...contacts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * Work that must commit with a session's end, run in its transaction (the streams module stops the
 * session's stream and recording there, with their events).
 */
export type EndingHook = (trx: Kysely<Database>, ended: SessionRow) => Promise<void>;

/**
 * Work that must commit with a session's deletion, run in its transaction: each module deletes what
 * it keeps of the session (the commands module its commands and their answers, the streams module its
 * stream state).
 */
export type RemovingHook = (trx: Kysely<Database>, sessionId: string) => Promise<void>;

export interface EndOptions {
  /** Write the `SessionEnd` event (false when the device sent its own). */
  emit: boolean;
  /** Default: now. */
  endedAt?: number;
}

export class SessionsService {
  private readonly decorators: SessionDecorator[] = [];
  private readonly endingHooks: EndingHook[] = [];
  private readonly removingHooks: RemovingHook[] = [];
  /** Socket contact not yet written: session → latest contact time. */
  private readonly contacts = new NotedTimes(1000);

  /**
   * Group commit of session starts: the starts that arrive while a group is being written go together
   * in the next one (one transaction, one fsync, for however many devices start at once).
   */
  private readonly starts: Batcher<SessionRow, SessionRow>;

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly events: Pick<EventsService, 'emitIn'>,
    private readonly signals: Signals,
  ) {
    // 10 columns a row: 500 rows stay far below either store's bound-parameter limit.
    this.starts = new Batcher((rows) => store.insertSessions(this.storage.db, rows), {
      name: 'sessions group commit',
      maxBatch: 500,
      concurrency: storage.writeConcurrency,
    });
  }

  addDecorator(decorator: SessionDecorator) {
    this.decorators.push(decorator);
  }

  /** Adds work to the transaction that deletes a session (`remove`). */
  onRemoving(hook: RemovingHook) {
    this.removingHooks.push(hook);
  }

  /** A page of a tenant's sessions in start order (`store.startOrderQuery`). */
  startOrderPage(tenantId: string, range: store.StartRange, after: store.StartCursor | null, limit: number) {
    return store.startOrderQuery(this.storage.db, tenantId, range, after, limit).execute();
  }

  /**
   * Deletes a session with what every module keeps of it, in one transaction. `keeps`, run first in
   * that transaction, can refuse (the events module: an event is left); false when the session stays
   * or was already gone.
   */
  async remove(sessionId: string, keeps: (trx: Kysely<Database>) => Promise<boolean>): Promise<boolean> {
    return this.storage.db.transaction().execute(async (trx) => {
      if (await keeps(trx)) return false;
      for (const hook of this.removingHooks) await hook(trx, sessionId);
      return store.deleteSession(trx, sessionId);
    });
  }

  /**
   * Erasure (the players module), in the caller's transaction: deletes the player's sessions started
   * at or before `upTo`, at most `limit` per statement, and returns their ids. Only the rows: what other
   * modules keep of them goes later, in batches, by the erasure job; reads of them are 404 from now on.
   */
  async erasePlayerIn(
    trx: Kysely<Database>,
    tenantId: string,
    playerId: string,
    upTo: number,
    limit: number,
  ) {
    const all: string[] = [];
    for (;;) {
      const ids = await store.deletePlayerSessions(trx, tenantId, playerId, upTo, limit);
      all.push(...ids);
      if (ids.length < limit) return all;
    }
  }

  /** Adds work to the transaction of every session's end. */
  onEnding(hook: EndingHook) {
    this.endingHooks.push(hook);
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

  /** Starts a session (group-committed with concurrent starts); `session.started` follows the commit. */
  async create(
    principal: DevicePrincipal,
    body: { tenantCohortId?: string; device?: Record<string, string> },
  ) {
    const row = await this.starts.submit(
      store.sessionRow({
        tenantId: principal.tenantId,
        playerId: principal.playerId,
        // A cohort in the token wins over one in the body.
        tenantCohortId: principal.tenantCohortId ?? body.tenantCohortId ?? null,
        device: body.device ?? {},
        now: this.clock.now(),
      }),
    );
    await this.signals.emit('session.started', {
      sessionId: row.session_id,
      tenantId: row.tenant_id,
      playerId: row.player_id,
      tenantCohortId: row.tenant_cohort_id,
      startedAt: row.started_at,
    });
    return row;
  }

  /** A tenant's session read through `db` (the caller's transaction). */
  async findIn(db: Kysely<Database>, tenantId: string, sessionId: string) {
    return (await store.findSession(db, tenantId, sessionId)) ?? null;
  }

  async findForTenant(tenantId: string, sessionId: string) {
    return (await store.findSession(this.storage.db, tenantId, sessionId)) ?? null;
  }

  /** Which of these sessions are still live (see `LiveSessions`). */
  stillLive(sessionIds: readonly string[]) {
    return store.stillLive(this.storage.db, sessionIds);
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

  /** Records device contact of many sessions, each at its own time, inside the caller's transaction. */
  async touchAll(trx: Kysely<Database>, contacts: Map<string, number>) {
    await store.touchEach(this.storage, trx, inSessionOrder(contacts));
  }

  /**
   * Ends a live session and emits `SessionEnd` (unless the device already sent one), in one
   * transaction, then announces it. Ending an ended session changes nothing and returns it as it is.
   */
  async end(row: SessionRow, reason: string, options: EndOptions = { emit: true }) {
    const ended = await this.storage.db
      .transaction()
      .execute((trx) => this.endIn(trx, row.session_id, reason, options));
    if (!ended) return (await store.findSession(this.storage.db, row.tenant_id, row.session_id)) ?? row;
    await this.announceEnd(ended);
    return ended;
  }

  /**
   * The end of a session inside the caller's transaction: the row, then the `onEnding` hooks (its
   * stream stops, with its events), then `SessionEnd` unless `emit` is false; all commit together.
   * Returns the ended row (for `announceEnd` once committed), or undefined when it was not live.
   */
  async endIn(trx: Kysely<Database>, sessionId: string, reason: string, options: EndOptions) {
    const ended = await store.endSession(trx, sessionId, options.endedAt ?? this.clock.now(), reason);
    if (ended) await this.afterEndIn(trx, ended, options.emit);
    return ended;
  }

  /** After the end committed: the signal `session.ended` (the device's socket is closed). */
  async announceEnd(row: SessionRow) {
    await this.signals.emit('session.ended', {
      sessionId: row.session_id,
      tenantId: row.tenant_id,
      playerId: row.player_id,
      tenantCohortId: row.tenant_cohort_id,
      endedAt: row.ended_at ?? this.clock.now(),
      reason: row.end_reason ?? 'device',
    });
  }

  private async afterEndIn(trx: Kysely<Database>, row: SessionRow, emit: boolean) {
    // Other modules wind down first (a live stream stops), then the session's own SessionEnd.
    for (const hook of this.endingHooks) await hook(trx, row);
    if (emit) await this.emitSessionEnd(trx, row);
  }

  /**
   * Records device contact over the socket without a write of its own: `flushContacts` (a job,
   * every second) writes every session's latest contact in a few statements, however many sockets.
   */
  noteContact(sessionId: string) {
    this.contacts.note(sessionId, this.clock.now());
  }

  /**
   * Writes the contact noted since the last flush: a transaction per `CONTACT_FLUSH_CHUNK` sessions,
   * in session id order, one after the other, each committed without waiting for the disk
   * (`durable: false`: contact is noted in memory a second before it is written anyway). Short
   * transactions keep SQLite's one writer free for the commands' group commits in between: one
   * transaction of 1,000 sessions held it 7–13 ms each second, and every command accepted meanwhile
   * waited for it. A transaction that fails leaves its contacts and the rest noted for the next flush
   * (a touch never moves lastSeenAt back, so writing one again is harmless).
   */
  async flushContacts(): Promise<number> {
    if (this.contacts.size === 0) return 0;
    // lastSeenAt is kept to the second here (the hub notes a socket's contact once a second at most).
    return this.contacts.flush(async (bySecond) => {
      const contacts = new Map<string, number>();
      for (const [at, ids] of bySecond) for (const id of ids) contacts.set(id, at);
      const ordered = inSessionOrder(contacts);
      for (let i = 0; i < ordered.length; i += CONTACT_FLUSH_CHUNK) {
        const chunk = ordered.slice(i, i + CONTACT_FLUSH_CHUNK);
        await this.storage.atomically(store.touchStatements(this.storage.dialect, chunk), { durable: false });
      }
    });
  }

  /**
   * Ends sessions without device contact for the idle timeout, each in its own transaction with its
   * stream's stop and its `SessionEnd` (reason `idle`, at the last contact); returns how many it ended.
   */
  async sweepIdle(idleTimeoutMs: number): Promise<number> {
    // Contact noted but not yet written must not let a connected session look idle.
    await this.flushContacts();
    const cutoff = this.clock.now() - idleTimeoutMs;
    let count = 0;
    for (const sessionId of await store.idleSessions(this.storage.db, cutoff)) {
      const ended = await this.storage.db.transaction().execute(async (trx) => {
        const row = await store.endIdleSession(trx, sessionId, cutoff);
        if (row) await this.afterEndIn(trx, row, true);
        return row;
      });
      if (!ended) continue;
      count++;
      await this.announceEnd(ended);
    }
    return count;
  }

  private async emitSessionEnd(trx: Kysely<Database>, row: SessionRow) {
    const duration = Math.max(0, Math.round(((row.ended_at ?? row.last_seen_at) - row.started_at) / 1000));
    await this.events.emitIn(
      trx,
      eventSession(row),
      'SessionEnd',
      { duration, reason: row.end_reason },
      row.ended_at ?? undefined,
    );
  }

  /** The live sessions of a tenant's cohort right now, in session id order, at most `limit`. */
  liveInCohort(tenantId: string, tenantCohortId: string, limit: number) {
    return store.liveInCohort(this.storage.db, tenantId, tenantCohortId, limit);
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
