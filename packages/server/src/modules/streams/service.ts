import type { Kysely } from 'kysely';
import type { Clock } from '../../clock.ts';
import { type ProblemError, problems } from '../../http/problem.ts';
import { uuidv7 } from '../../ids.ts';
import type { SettledCommand } from '../../signals.ts';
import type { Database, Storage } from '../../storage/index.ts';
import type { EventsService } from '../events/index.ts';
import {
  eventSession,
  type SessionLiveState,
  type SessionRow,
  type SessionsService,
} from '../sessions/index.ts';
import {
  type Action,
  type ActionInput,
  advance,
  type ConflictCode,
  IDLE_SNAPSHOT,
  type ResolvedEffect,
  STREAM_COMMAND_NAMES,
  type Step,
  type StreamCommandName,
  type StreamParams,
  type StreamSnapshot,
} from './state-machine.ts';
import * as store from './store.ts';

export type { StreamParams } from './state-machine.ts';
export type { StreamInterval } from './store.ts';

/** The session a state change belongs to, as its events and its stream intervals need it. */
interface Owner {
  sessionId: string;
  tenantId: string;
  tenantCohortId: string | null;
  playerId: string;
}

interface Applied {
  before: StreamSnapshot;
  after: StreamSnapshot;
  events: Extract<ResolvedEffect, { kind: 'emit' }>[];
}

type Decide = (current: StreamSnapshot) => Step;

/** Compare-and-set attempts before giving up; each failure means another writer just moved the state. */
const MAX_ATTEMPTS = 8;
const SWEEP_BATCH = 500;

const CONFLICTS: Record<ConflictCode, () => ProblemError> = {
  already_streaming: problems.alreadyStreaming,
  not_streaming: problems.notStreaming,
  already_recording: problems.alreadyRecording,
  not_recording: problems.notRecording,
};

function ownerOf(session: SessionRow): Owner {
  return { ...eventSession(session), playerId: session.player_id };
}

function assertLive(session: SessionRow) {
  if (session.status !== 'live') throw problems.sessionEnded();
}

/**
 * The stream and recording state of every session (CONTRACT §2, §3): tenant commands move it through
 * `starting`/`stopping` and wait on the device's answer (signal `command.settled`); the app moves it
 * directly; disconnects and session ends stop it. Every stream that ran is a `stream_intervals` row.
 */
export class StreamsService {
  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly sessions: SessionsService,
    private readonly events: Pick<EventsService, 'emitIn'>,
  ) {}

  // --- tenant commands: run inside the transaction that stores the command row -----------------

  /** `starting`, waiting on `commandId`; allocates the stream's id. 409 `already_streaming`. */
  async requestStreamStart(
    trx: Kysely<Database>,
    session: SessionRow,
    params: StreamParams,
    commandId: string,
  ): Promise<{ streamingSessionId: string }> {
    assertLive(session);
    const streamingSessionId = uuidv7();
    await this.request(
      trx,
      session,
      { type: 'requestStreamStart' },
      { streamingSessionId, params, commandId },
    );
    return { streamingSessionId };
  }

  /** `stopping`, waiting on `commandId`. 409 `not_streaming` unless streaming. */
  async requestStreamStop(
    trx: Kysely<Database>,
    session: SessionRow,
    commandId: string,
  ): Promise<{ streamingSessionId: string }> {
    assertLive(session);
    const { after } = await this.request(trx, session, { type: 'requestStreamStop' }, { commandId });
    return { streamingSessionId: after.streamingSessionId! };
  }

  /** Recording `starting`; allocates its id. 409 `not_streaming` / `already_recording`. */
  async requestRecordStart(
    trx: Kysely<Database>,
    session: SessionRow,
    commandId: string,
  ): Promise<{ recordingId: string }> {
    assertLive(session);
    const recordingId = uuidv7();
    await this.request(trx, session, { type: 'requestRecordStart' }, { recordingId, commandId });
    return { recordingId };
  }

  /** Recording `stopping`. 409 `not_recording`. */
  async requestRecordStop(
    trx: Kysely<Database>,
    session: SessionRow,
    commandId: string,
  ): Promise<{ recordingId: string }> {
    assertLive(session);
    const { after } = await this.request(trx, session, { type: 'requestRecordStop' }, { commandId });
    return { recordingId: after.recordingId! };
  }

  /** Requests only enter `starting`/`stopping`: they report nothing, so they emit no events. */
  private async request(
    trx: Kysely<Database>,
    session: SessionRow,
    action: Action,
    input: Omit<ActionInput, 'now'>,
  ): Promise<Applied> {
    const applied = await this.step(trx, ownerOf(session), (current) =>
      advance(current, action, { ...input, now: this.clock.now() }),
    );
    if (!applied || applied.events.length > 0) throw new Error(`${action.type} must change state silently`);
    return applied;
  }

  // --- started or stopped inside the app ---------------------------------------------------------

  async appStreamStart(session: SessionRow, params: StreamParams): Promise<{ streamingSessionId: string }> {
    assertLive(session);
    const streamingSessionId = uuidv7();
    await this.run(ownerOf(session), { type: 'appStreamStart' }, { streamingSessionId, params });
    return { streamingSessionId };
  }

  async appStreamStop(session: SessionRow): Promise<{ streamingSessionId: string }> {
    assertLive(session);
    const applied = await this.run(ownerOf(session), { type: 'appStreamStop' }, {});
    return { streamingSessionId: applied.before.streamingSessionId! };
  }

  async appRecordStart(session: SessionRow): Promise<{ recordingId: string }> {
    assertLive(session);
    const recordingId = uuidv7();
    await this.run(ownerOf(session), { type: 'appRecordStart' }, { recordingId });
    return { recordingId };
  }

  async appRecordStop(session: SessionRow): Promise<{ recordingId: string }> {
    assertLive(session);
    const applied = await this.run(ownerOf(session), { type: 'appRecordStop' }, {});
    return { recordingId: applied.before.recordingId! };
  }

  private async run(owner: Owner, action: Action, input: Omit<ActionInput, 'now'>): Promise<Applied> {
    const applied = await this.commit(owner, (current) =>
      advance(current, action, { ...input, now: this.clock.now() }),
    );
    if (!applied) throw new Error(`${action.type} cannot be ignored`);
    return applied;
  }

  // --- reactions ----------------------------------------------------------------------------------

  /**
   * The device answered (or did not, or the command was cancelled): only the command the state waits
   * on counts; stale outcomes do nothing. Runs in `trx`, the transaction that settles the command (the
   * commands module's settle hook), so the settlement, the state and its events commit together.
   */
  async onCommandSettled(trx: Kysely<Database>, command: SettledCommand): Promise<void> {
    const name = command.name as StreamCommandName;
    if (!STREAM_COMMAND_NAMES.includes(name)) return;
    const session = await this.sessions.findForTenant(command.tenantId, command.sessionId);
    if (!session) return;
    const waitedOn = (s: StreamSnapshot) =>
      (name.startsWith('stream.') ? s.streamCommandId : s.recordingCommandId) === command.commandId;
    // A session that ended meanwhile gets no new stream: the outcome winds it down instead.
    const action: Action =
      session.status === 'live'
        ? { type: 'commandSettled', name, outcome: command.outcome }
        : { type: 'sessionEnd' };
    const stoppedAt = session.status === 'live' ? undefined : (session.ended_at ?? undefined);
    await this.step(trx, ownerOf(session), (current) =>
      waitedOn(current)
        ? advance(current, action, { now: this.clock.now(), stoppedAt })
        : { kind: 'ignored' },
    );
  }

  /** The session is deleted (the sessions module's `onRemoving` hook): its stream state goes with it. */
  /** Erasure (the players module): these sessions' stream state and up to `limit` intervals; rows deleted. */
  eraseSessions(
    scope: { tenantId: string; playerId: string; sessionIds: string[] },
    limit: number,
  ): Promise<number> {
    return store.eraseSessionStreams(this.storage.db, scope, scope.sessionIds, limit);
  }

  async forgetSession(trx: Kysely<Database>, sessionId: string) {
    await store.deleteSessionStreams(trx, sessionId);
  }

  /**
   * The session ended: its stream and recording stop at the session's end time, with their events,
   * in `trx`, the transaction that ends the session (the sessions module's `onEnding` hook).
   */
  async stopOnSessionEnd(trx: Kysely<Database>, ended: SessionRow) {
    const endedAt = ended.ended_at ?? this.clock.now();
    await this.step(trx, ownerOf(ended), (current) =>
      advance(current, { type: 'sessionEnd' }, { now: this.clock.now(), stoppedAt: endedAt }),
    );
  }

  /**
   * Stops the streams whose device has been gone longer than `graceMs`: no live socket (per
   * `connectedSessionIds`) and no contact since `now − graceMs`. The interval ends at the last contact.
   * A stream still `starting` is left to its command, which is delivered on reconnect or expires.
   * Goes through every live stream in pages of `batchSize`; returns how many it stopped.
   */
  async sweepDisconnected(
    graceMs: number,
    connectedSessionIds: (ids: string[]) => Promise<Set<string>>,
    batchSize = SWEEP_BATCH,
  ): Promise<number> {
    let stopped = 0;
    let after: store.ActiveStream | undefined;
    for (;;) {
      const candidates = await store.liveStreams(this.storage.db, batchSize, after);
      if (candidates.length === 0) break;
      after = candidates[candidates.length - 1];
      const connected = await connectedSessionIds(candidates.map((c) => c.sessionId));
      const cutoff = this.clock.now() - graceMs;
      for (const c of candidates) {
        if (!connected.has(c.sessionId) && (await this.stopIfGone(c, cutoff))) stopped++;
      }
      if (candidates.length < batchSize) break;
    }
    return stopped;
  }

  private async stopIfGone(c: store.ActiveStream, cutoff: number): Promise<boolean> {
    const session = await this.sessions.findForTenant(c.tenantId, c.sessionId);
    if (!session) return false;
    const ended = session.status !== 'live';
    if (!ended && session.last_seen_at >= cutoff) return false;
    const action: Action = ended ? { type: 'sessionEnd' } : { type: 'disconnect' };
    const stoppedAt = ended ? (session.ended_at ?? session.last_seen_at) : session.last_seen_at;
    const applied = await this.commit(ownerOf(session), (current) =>
      // Only the stream this sweep looked at: one started since is not stopped for an old silence.
      current.streamingSessionId === c.streamingSessionId
        ? advance(current, action, { now: this.clock.now(), stoppedAt })
        : { kind: 'ignored' },
    );
    return applied !== null;
  }

  // --- reading ------------------------------------------------------------------------------------

  /** The session decorator: stream and recording of many sessions, in one query. */
  async liveStates(sessionIds: string[]): Promise<Map<string, Partial<SessionLiveState>>> {
    const snapshots = await store.readSnapshots(this.storage.db, sessionIds);
    const out = new Map<string, Partial<SessionLiveState>>();
    for (const [id, s] of snapshots) {
      out.set(id, {
        stream: {
          state: s.stream,
          streamingSessionId: s.streamingSessionId,
          resolution: s.resolution,
          aspectratio: s.aspectratio,
          startedAt: s.streamStartedAt,
        },
        recording: { state: s.recording, recordingId: s.recordingId, startedAt: s.recordingStartedAt },
      });
    }
    return out;
  }

  /**
   * The stream events of a session are tied to right now: one streaming (or stopping), else null.
   * Read through `db` when given (a transaction that may have just changed it).
   */
  async currentStreamId(sessionId: string, db: Kysely<Database> = this.storage.db): Promise<string | null> {
    const s = await store.readSnapshot(db, sessionId);
    return s && (s.stream === 'streaming' || s.stream === 'stopping') ? s.streamingSessionId : null;
  }

  /** A player's streams overlapping `[from, to)`, oldest first; `stoppedAt` is null while one runs. */
  intervalsForPlayer(tenantId: string, playerId: string, from?: number, to?: number) {
    return store.playerIntervals(this.storage.db, tenantId, playerId, from, to);
  }

  // --- the one way state changes --------------------------------------------------------------

  /** A state change with its interval rows and its events, in one transaction of its own. */
  private commit(owner: Owner, decide: Decide): Promise<Applied | null> {
    return this.storage.db.transaction().execute((trx) => this.step(trx, owner, decide));
  }

  /**
   * Reads the state, decides, and writes the decision with a compare-and-set; when another writer
   * got there first, decides again on what it wrote. Interval rows and the events the change emits
   * (with their outbox rows: `events.emitIn`) are written in the same transaction, `db`, so a state
   * change is never committed without its events, nor an event without its change.
   * Throws the conflict problem; returns null when the action does nothing.
   */
  private async step(db: Kysely<Database>, owner: Owner, decide: Decide): Promise<Applied | null> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const stored = await store.readSnapshot(db, owner.sessionId);
      const before = stored ?? IDLE_SNAPSHOT;
      const step = decide(before);
      if (step.kind === 'conflict') throw CONFLICTS[step.code]();
      if (step.kind === 'ignored') return null;
      const now = this.clock.now();
      if (!stored) await store.insertIdleRow(db, owner.sessionId, now);
      if (!(await store.compareAndSet(db, owner.sessionId, before, step.next, now))) continue;
      const events: Applied['events'] = [];
      for (const effect of step.effects) {
        if (effect.kind === 'openInterval') {
          await store.openInterval(db, {
            streamingSessionId: effect.streamingSessionId,
            sessionId: owner.sessionId,
            tenantId: owner.tenantId,
            playerId: owner.playerId,
            startedAt: effect.startedAt,
          });
        } else if (effect.kind === 'closeInterval') {
          await store.closeInterval(db, effect.streamingSessionId, effect.stoppedAt, effect.reason);
        } else {
          events.push(effect);
        }
      }
      // In the order the machine gives them (RecordingStopped before StreamStopped).
      const session = {
        sessionId: owner.sessionId,
        tenantId: owner.tenantId,
        tenantCohortId: owner.tenantCohortId,
      };
      for (const e of events) await this.events.emitIn(db, session, e.event, e.fields);
      return { before, after: step.next, events };
    }
    throw new Error(`the stream state of session ${owner.sessionId} kept changing`);
  }
}
