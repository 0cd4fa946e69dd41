import type { CommandOutcome } from '../../signals.ts';

/**
 * The stream and recording state machines of one session, as pure functions: no I/O, no clock.
 * `transition` decides on the two states alone; `advance` applies that decision to the stored
 * snapshot (ids, times, the command waited on) and resolves the effects for the service to carry out.
 */

export type StreamState = 'idle' | 'starting' | 'streaming' | 'stopping';
export type RecordingState = 'idle' | 'starting' | 'recording' | 'stopping';
export type ConflictCode = 'already_streaming' | 'not_streaming' | 'already_recording' | 'not_recording';
/** Why a stream stopped, as `StreamStopped.reason` and `stream_intervals.stop_reason` say it. */
export type StopReason = 'command' | 'app' | 'disconnected' | 'session_ended';
export type StreamCommandName = 'stream.start' | 'stream.stop' | 'record.start' | 'record.stop';
export type ServerEventType = 'StreamStarted' | 'StreamStopped' | 'RecordingStarted' | 'RecordingStopped';

export const STREAM_COMMAND_NAMES: readonly StreamCommandName[] = [
  'stream.start',
  'stream.stop',
  'record.start',
  'record.stop',
];

export interface States {
  stream: StreamState;
  recording: RecordingState;
}

export type Action =
  /** Tenant commands, at the moment the command is accepted (CONTRACT §3). */
  | { type: 'requestStreamStart' }
  | { type: 'requestStreamStop' }
  | { type: 'requestRecordStart' }
  | { type: 'requestRecordStop' }
  /** What the command the state waits on came to. */
  | { type: 'commandSettled'; name: StreamCommandName; outcome: CommandOutcome }
  /** Started or stopped inside the app (CONTRACT §2, spec rule 3): no command to wait on. */
  | { type: 'appStreamStart' }
  | { type: 'appStreamStop' }
  | { type: 'appRecordStart' }
  | { type: 'appRecordStop' }
  /** The device stayed away longer than the grace. */
  | { type: 'disconnect' }
  | { type: 'sessionEnd' };

export type Effect =
  | { kind: 'openInterval' }
  | { kind: 'closeInterval'; reason: StopReason }
  | { kind: 'emit'; event: 'StreamStarted' | 'RecordingStarted' | 'RecordingStopped' }
  | { kind: 'emit'; event: 'StreamStopped'; reason: StopReason };

export type Transition =
  | { kind: 'next'; stream: StreamState; recording: RecordingState; effects: Effect[] }
  | { kind: 'conflict'; code: ConflictCode }
  /** Nothing to do: a stale command outcome, or stopping what is not running. */
  | { kind: 'ignored' };

const IGNORED: Transition = { kind: 'ignored' };

function next(stream: StreamState, recording: RecordingState, effects: Effect[] = []): Transition {
  return { kind: 'next', stream, recording, effects };
}

function conflict(code: ConflictCode): Transition {
  return { kind: 'conflict', code };
}

/** A recording that has started (and so emitted RecordingStarted) is one that must emit RecordingStopped. */
function recordingActive(s: States) {
  return s.recording === 'recording' || s.recording === 'stopping';
}

/** A stream that has started: it has an open interval and emitted StreamStarted. */
function streamLive(s: States) {
  return s.stream === 'streaming' || s.stream === 'stopping';
}

/**
 * The stream ends, and a recording with it. A stream that never started (`starting`) just falls back
 * to idle: there was no StreamStarted, so there is no StreamStopped and no interval.
 */
function streamEnds(s: States, reason: StopReason): Transition {
  const effects: Effect[] = [];
  if (recordingActive(s)) effects.push({ kind: 'emit', event: 'RecordingStopped' });
  if (streamLive(s)) {
    effects.push({ kind: 'closeInterval', reason }, { kind: 'emit', event: 'StreamStopped', reason });
  }
  return next('idle', 'idle', effects);
}

function settled(s: States, name: StreamCommandName, outcome: CommandOutcome): Transition {
  const ok = outcome === 'acknowledged';
  switch (name) {
    case 'stream.start':
      if (s.stream !== 'starting') return IGNORED;
      return ok
        ? next('streaming', s.recording, [{ kind: 'openInterval' }, { kind: 'emit', event: 'StreamStarted' }])
        : next('idle', 'idle');
    case 'stream.stop':
      if (s.stream !== 'stopping') return IGNORED;
      return ok ? streamEnds(s, 'command') : next('streaming', s.recording);
    case 'record.start':
      if (s.recording !== 'starting' || !streamLive(s)) return IGNORED;
      return ok
        ? next(s.stream, 'recording', [{ kind: 'emit', event: 'RecordingStarted' }])
        : next(s.stream, 'idle');
    case 'record.stop':
      if (s.recording !== 'stopping') return IGNORED;
      return ok
        ? next(s.stream, 'idle', [{ kind: 'emit', event: 'RecordingStopped' }])
        : next(s.stream, 'recording');
  }
}

/** The next states and their effects, or the conflict that refuses the action. */
export function transition(s: States, action: Action): Transition {
  switch (action.type) {
    case 'requestStreamStart':
      return s.stream === 'idle' ? next('starting', s.recording) : conflict('already_streaming');
    case 'requestStreamStop':
      return s.stream === 'streaming' ? next('stopping', s.recording) : conflict('not_streaming');
    case 'requestRecordStart':
      if (s.stream !== 'streaming') return conflict('not_streaming');
      return s.recording === 'idle' ? next(s.stream, 'starting') : conflict('already_recording');
    case 'requestRecordStop':
      return s.recording === 'recording' ? next(s.stream, 'stopping') : conflict('not_recording');
    case 'commandSettled':
      return settled(s, action.name, action.outcome);
    case 'appStreamStart':
      return s.stream === 'idle'
        ? next('streaming', s.recording, [{ kind: 'openInterval' }, { kind: 'emit', event: 'StreamStarted' }])
        : conflict('already_streaming');
    case 'appStreamStop':
      // While a stop command is in flight the stream still runs; the app stopping it is the truth.
      return streamLive(s) ? streamEnds(s, 'app') : conflict('not_streaming');
    case 'appRecordStart':
      if (s.stream !== 'streaming') return conflict('not_streaming');
      return s.recording === 'idle'
        ? next(s.stream, 'recording', [{ kind: 'emit', event: 'RecordingStarted' }])
        : conflict('already_recording');
    case 'appRecordStop':
      return recordingActive(s)
        ? next(s.stream, 'idle', [{ kind: 'emit', event: 'RecordingStopped' }])
        : conflict('not_recording');
    case 'disconnect':
      return s.stream === 'idle' ? IGNORED : streamEnds(s, 'disconnected');
    case 'sessionEnd':
      return s.stream === 'idle' ? IGNORED : streamEnds(s, 'session_ended');
  }
}

/** Everything stored about a session's stream and recording (one `session_streams` row). */
export interface StreamSnapshot {
  stream: StreamState;
  streamingSessionId: string | null;
  resolution: number | null;
  aspectratio: number | null;
  streamStartedAt: number | null;
  /** The command a `starting`/`stopping` stream waits on; null when the app started or stopped it. */
  streamCommandId: string | null;
  recording: RecordingState;
  recordingId: string | null;
  recordingStartedAt: number | null;
  recordingCommandId: string | null;
}

export const IDLE_SNAPSHOT: StreamSnapshot = {
  stream: 'idle',
  streamingSessionId: null,
  resolution: null,
  aspectratio: null,
  streamStartedAt: null,
  streamCommandId: null,
  recording: 'idle',
  recordingId: null,
  recordingStartedAt: null,
  recordingCommandId: null,
};

export interface StreamParams {
  resolution: number;
  aspectratio: number;
}

/** What an action brings with it. Ids are allocated by the caller, so this stays pure. */
export interface ActionInput {
  now: number;
  /** When a stopped stream ended (last contact, session end); `now` when absent. */
  stoppedAt?: number;
  /** For a stream that starts (request or app). */
  streamingSessionId?: string;
  params?: StreamParams;
  /** For a recording that starts. */
  recordingId?: string;
  /** For a tenant request: the command the new state waits on. */
  commandId?: string;
}

export type ResolvedEffect =
  | { kind: 'openInterval'; streamingSessionId: string; startedAt: number }
  | { kind: 'closeInterval'; streamingSessionId: string; stoppedAt: number; reason: StopReason }
  | { kind: 'emit'; event: ServerEventType; fields: Record<string, unknown> };

export type Step =
  | { kind: 'next'; next: StreamSnapshot; effects: ResolvedEffect[] }
  | { kind: 'conflict'; code: ConflictCode }
  | { kind: 'ignored' };

function required<T>(value: T | undefined, name: string): T {
  if (value === undefined) throw new Error(`stream state machine: ${name} is required for this action`);
  return value;
}

function waitsOnCommand(state: StreamState | RecordingState) {
  return state === 'starting' || state === 'stopping';
}

/** The fields of a server-emitted event (CONTRACT §2), from the snapshots before and after. */
function eventFields(
  e: Extract<Effect, { kind: 'emit' }>,
  before: StreamSnapshot,
  after: StreamSnapshot,
): Record<string, unknown> {
  switch (e.event) {
    case 'StreamStarted':
      return {
        streamingSessionId: after.streamingSessionId,
        resolution: after.resolution,
        aspectratio: after.aspectratio,
      };
    case 'StreamStopped':
      return { streamingSessionId: before.streamingSessionId, reason: e.reason };
    case 'RecordingStarted':
      return { recordingId: after.recordingId, streamingSessionId: after.streamingSessionId };
    case 'RecordingStopped':
      return { recordingId: before.recordingId, streamingSessionId: before.streamingSessionId };
  }
}

/** Applies `action` to a stored snapshot: the next snapshot and the effects with their ids and times. */
export function advance(current: StreamSnapshot, action: Action, input: ActionInput): Step {
  const t = transition({ stream: current.stream, recording: current.recording }, action);
  if (t.kind !== 'next') return t;
  const n: StreamSnapshot = { ...current, stream: t.stream, recording: t.recording };

  if (t.stream === 'idle') {
    Object.assign(n, {
      streamingSessionId: null,
      resolution: null,
      aspectratio: null,
      streamStartedAt: null,
      streamCommandId: null,
    });
  } else if (t.stream !== current.stream) {
    if (current.stream === 'idle') {
      const params = required(input.params, 'params');
      n.streamingSessionId = required(input.streamingSessionId, 'streamingSessionId');
      n.resolution = params.resolution;
      n.aspectratio = params.aspectratio;
    }
    if (t.stream === 'streaming' && current.stream !== 'stopping') n.streamStartedAt = input.now;
    n.streamCommandId = waitsOnCommand(t.stream) ? required(input.commandId, 'commandId') : null;
  }

  if (t.recording === 'idle') {
    Object.assign(n, { recordingId: null, recordingStartedAt: null, recordingCommandId: null });
  } else if (t.recording !== current.recording) {
    if (current.recording === 'idle') n.recordingId = required(input.recordingId, 'recordingId');
    if (t.recording === 'recording' && current.recording !== 'stopping') n.recordingStartedAt = input.now;
    n.recordingCommandId = waitsOnCommand(t.recording) ? required(input.commandId, 'commandId') : null;
  }

  const effects = t.effects.map((e): ResolvedEffect => {
    if (e.kind === 'openInterval') {
      return {
        kind: 'openInterval',
        streamingSessionId: n.streamingSessionId!,
        startedAt: n.streamStartedAt!,
      };
    }
    if (e.kind === 'closeInterval') {
      return {
        kind: 'closeInterval',
        streamingSessionId: current.streamingSessionId!,
        // An interval never ends before it began, whatever the clocks said.
        stoppedAt: Math.max(input.stoppedAt ?? input.now, current.streamStartedAt ?? 0),
        reason: e.reason,
      };
    }
    return { kind: 'emit', event: e.event, fields: eventFields(e, current, n) };
  });
  return { kind: 'next', next: n, effects };
}
