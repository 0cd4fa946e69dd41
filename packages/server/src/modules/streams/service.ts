import type { Kysely } from 'kysely';
import { uuidv7 } from 'uuidv7';
import type { Clock } from '../../clock.ts';
import { type ProblemError, problems } from '../../http/problem.ts';
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

/** The session a state change belongs to. `playerId` is needed only when a stream starts. */
interface Owner {
  sessionId: string;
  tenantId: string;
  playerId: string | null;
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
  return { sessionId: session.session_id, tenantId: session.tenant_id, playerId: session.player_id };
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
    private readonly events: Pick<EventsService, 'emit'>,
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

  /** Requests only enter `starting`/`stopping`: no events, so nothing has to wait for the caller's commit. */
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
    const applied = await this.commitAndEmit(owner, (current) =>
      advance(current, action, { ...input, now: this.clock.now() }),
    );
    if (!applied) throw new Error(`${action.type} cannot be ignored`);
    return applied;
  }

  // --- reactions ----------------------------------------------------------------------------------

  /** The device answered (or did not): only the command the state waits on counts; stale outcomes do nothing. */
  async onCommandSettled(command: SettledCommand): Promise<void> {
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
    await this.commitAndEmit(ownerOf(session), (current) =>
      waitedOn(current)
        ? advance(current, action, { now: this.clock.now(), stoppedAt })
        : { kind: 'ignored' },
    );
  }

  /** The session ended: its stream and recording stop at the session's end time. */
  async stopOnSessionEnd(ended: { sessionId: string; tenantId: string; endedAt: number }) {
    const owner = { sessionId: ended.sessionId, tenantId: ended.tenantId, playerId: null };
    const endedAt = ended.endedAt;
    await this.commitAndEmit(owner, (current) =>
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
    const applied = await this.commitAndEmit(ownerOf(session), (current) =>
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

  /** The stream events of a session are tied to right now: one streaming (or stopping), else null. */
  async currentStreamId(sessionId: string): Promise<string | null> {
    const s = (await store.readSnapshots(this.storage.db, [sessionId])).get(sessionId);
    return s && (s.stream === 'streaming' || s.stream === 'stopping') ? s.streamingSessionId : null;
  }

  /** A player's streams overlapping `[from, to)`, oldest first; `stoppedAt` is null while one runs. */
  intervalsForPlayer(tenantId: string, playerId: string, from?: number, to?: number) {
    return store.playerIntervals(this.storage.db, tenantId, playerId, from, to);
  }

  // --- the one way state changes --------------------------------------------------------------

  /** A state change in its own transaction, then its events (only once the change is committed). */
  private async commitAndEmit(owner: Owner, decide: Decide): Promise<Applied | null> {
    const applied = await this.storage.db.transaction().execute((trx) => this.step(trx, owner, decide));
    if (!applied) return null;
    const session = await this.sessions.findForTenant(owner.tenantId, owner.sessionId);
    if (!session) return applied;
    for (const e of applied.events) await this.events.emit(eventSession(session), e.event, e.fields);
    return applied;
  }

  /**
   * Reads the state, decides, and writes the decision with a compare-and-set; when another writer
   * got there first, decides again on what it wrote. Interval rows change in the same transaction.
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
          if (!owner.playerId) throw new Error('a stream cannot start without its player');
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
      return { before, after: step.next, events };
    }
    throw new Error(`the stream state of session ${owner.sessionId} kept changing`);
  }
}
