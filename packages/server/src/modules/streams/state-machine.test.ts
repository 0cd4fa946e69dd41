import { describe, expect, it } from 'vitest';
import type { CommandOutcome } from '../../signals.ts';
import {
  type Action,
  advance,
  type Effect,
  IDLE_SNAPSHOT,
  type RecordingState,
  type StreamSnapshot,
  type StreamState,
  type Transition,
  transition,
} from './state-machine.ts';

/** Every reachable pair: a recording exists only on a stream that has started. */
const STATES = [
  'idle/idle',
  'starting/idle',
  'streaming/idle',
  'streaming/starting',
  'streaming/recording',
  'streaming/stopping',
  'stopping/idle',
  'stopping/starting',
  'stopping/recording',
  'stopping/stopping',
] as const;
type StateKey = (typeof STATES)[number];

function parse(key: StateKey) {
  const [stream, recording] = key.split('/') as [StreamState, RecordingState];
  return { stream, recording };
}

function effectText(e: Effect) {
  if (e.kind === 'openInterval') return 'open';
  if (e.kind === 'closeInterval') return `close:${e.reason}`;
  return e.event === 'StreamStopped' ? `StreamStopped:${e.reason}` : e.event;
}

/** `streaming/idle open StreamStarted`, `409 not_streaming`, or `-` for ignored. */
function render(t: Transition) {
  if (t.kind === 'conflict') return `409 ${t.code}`;
  if (t.kind === 'ignored') return '-';
  return [`${t.stream}/${t.recording}`, ...t.effects.map(effectText)].join(' ');
}

type Row = Partial<Record<StateKey, string>> & { others: string };

const settled = (
  name: 'stream.start' | 'stream.stop' | 'record.start' | 'record.stop',
  outcome: CommandOutcome,
) => ({ type: 'commandSettled', name, outcome }) as const;

const stopsEverything = (reason: string): Row => ({
  'idle/idle': '-',
  'starting/idle': 'idle/idle',
  'streaming/idle': `idle/idle close:${reason} StreamStopped:${reason}`,
  'streaming/starting': `idle/idle close:${reason} StreamStopped:${reason}`,
  'streaming/recording': `idle/idle RecordingStopped close:${reason} StreamStopped:${reason}`,
  'streaming/stopping': `idle/idle RecordingStopped close:${reason} StreamStopped:${reason}`,
  'stopping/idle': `idle/idle close:${reason} StreamStopped:${reason}`,
  'stopping/starting': `idle/idle close:${reason} StreamStopped:${reason}`,
  'stopping/recording': `idle/idle RecordingStopped close:${reason} StreamStopped:${reason}`,
  'stopping/stopping': `idle/idle RecordingStopped close:${reason} StreamStopped:${reason}`,
  others: 'unused',
});

const TABLE: [string, Action, Row][] = [
  [
    'tenant stream start',
    { type: 'requestStreamStart' },
    { 'idle/idle': 'starting/idle', others: '409 already_streaming' },
  ],
  [
    'tenant stream stop',
    { type: 'requestStreamStop' },
    {
      'streaming/idle': 'stopping/idle',
      'streaming/starting': 'stopping/starting',
      'streaming/recording': 'stopping/recording',
      'streaming/stopping': 'stopping/stopping',
      others: '409 not_streaming',
    },
  ],
  [
    'tenant record start',
    { type: 'requestRecordStart' },
    {
      'streaming/idle': 'streaming/starting',
      'streaming/starting': '409 already_recording',
      'streaming/recording': '409 already_recording',
      'streaming/stopping': '409 already_recording',
      others: '409 not_streaming',
    },
  ],
  [
    'tenant record stop',
    { type: 'requestRecordStop' },
    {
      'streaming/recording': 'streaming/stopping',
      'stopping/recording': 'stopping/stopping',
      others: '409 not_recording',
    },
  ],
  [
    'stream.start acknowledged',
    settled('stream.start', 'acknowledged'),
    { 'starting/idle': 'streaming/idle open StreamStarted', others: '-' },
  ],
  ['stream.start failed', settled('stream.start', 'failed'), { 'starting/idle': 'idle/idle', others: '-' }],
  ['stream.start expired', settled('stream.start', 'expired'), { 'starting/idle': 'idle/idle', others: '-' }],
  [
    'stream.start cancelled',
    settled('stream.start', 'cancelled'),
    { 'starting/idle': 'idle/idle', others: '-' },
  ],
  [
    'stream.stop acknowledged',
    settled('stream.stop', 'acknowledged'),
    {
      'stopping/idle': 'idle/idle close:command StreamStopped:command',
      'stopping/starting': 'idle/idle close:command StreamStopped:command',
      'stopping/recording': 'idle/idle RecordingStopped close:command StreamStopped:command',
      'stopping/stopping': 'idle/idle RecordingStopped close:command StreamStopped:command',
      others: '-',
    },
  ],
  ...(['failed', 'expired', 'cancelled'] as const).map((outcome): [string, Action, Row] => [
    `stream.stop ${outcome}`,
    settled('stream.stop', outcome),
    {
      'stopping/idle': 'streaming/idle',
      'stopping/starting': 'streaming/starting',
      'stopping/recording': 'streaming/recording',
      'stopping/stopping': 'streaming/stopping',
      others: '-',
    },
  ]),
  [
    'record.start acknowledged',
    settled('record.start', 'acknowledged'),
    {
      'streaming/starting': 'streaming/recording RecordingStarted',
      'stopping/starting': 'stopping/recording RecordingStarted',
      others: '-',
    },
  ],
  ...(['failed', 'expired', 'cancelled'] as const).map((outcome): [string, Action, Row] => [
    `record.start ${outcome}`,
    settled('record.start', outcome),
    { 'streaming/starting': 'streaming/idle', 'stopping/starting': 'stopping/idle', others: '-' },
  ]),
  [
    'record.stop acknowledged',
    settled('record.stop', 'acknowledged'),
    {
      'streaming/stopping': 'streaming/idle RecordingStopped',
      'stopping/stopping': 'stopping/idle RecordingStopped',
      others: '-',
    },
  ],
  ...(['failed', 'expired', 'cancelled'] as const).map((outcome): [string, Action, Row] => [
    `record.stop ${outcome}`,
    settled('record.stop', outcome),
    { 'streaming/stopping': 'streaming/recording', 'stopping/stopping': 'stopping/recording', others: '-' },
  ]),
  [
    'app stream start',
    { type: 'appStreamStart' },
    { 'idle/idle': 'streaming/idle open StreamStarted', others: '409 already_streaming' },
  ],
  [
    'app stream stop',
    { type: 'appStreamStop' },
    {
      ...stopsEverything('app'),
      'idle/idle': '409 not_streaming',
      'starting/idle': '409 not_streaming',
    },
  ],
  [
    'app record start',
    { type: 'appRecordStart' },
    {
      'streaming/idle': 'streaming/recording RecordingStarted',
      'streaming/starting': '409 already_recording',
      'streaming/recording': '409 already_recording',
      'streaming/stopping': '409 already_recording',
      others: '409 not_streaming',
    },
  ],
  [
    'app record stop',
    { type: 'appRecordStop' },
    {
      'streaming/recording': 'streaming/idle RecordingStopped',
      'streaming/stopping': 'streaming/idle RecordingStopped',
      'stopping/recording': 'stopping/idle RecordingStopped',
      'stopping/stopping': 'stopping/idle RecordingStopped',
      others: '409 not_recording',
    },
  ],
  ['disconnect', { type: 'disconnect' }, stopsEverything('disconnected')],
  ['session end', { type: 'sessionEnd' }, stopsEverything('session_ended')],
];

describe('transition: every action from every state', () => {
  const cases = TABLE.flatMap(([name, action, row]) =>
    STATES.map((state) => [name, state, action, row[state] ?? row.others] as const),
  );

  it('covers 26 actions × 10 states', () => {
    expect(cases).toHaveLength(260);
  });

  it.each(cases)('%s from %s', (_name, state, action, expected) => {
    expect(render(transition(parse(state), action))).toBe(expected);
  });
});

describe('advance: ids, times and the command waited on', () => {
  const params = { resolution: 2, aspectratio: 1 };
  const stepTo = (s: StreamSnapshot, action: Action, input: Parameters<typeof advance>[2]) => {
    const step = advance(s, action, input);
    if (step.kind !== 'next') throw new Error(`expected a transition, got ${step.kind}`);
    return step;
  };

  it('a tenant-started stream with a recording, stopped by command', () => {
    const a = stepTo(
      IDLE_SNAPSHOT,
      { type: 'requestStreamStart' },
      {
        now: 100,
        streamingSessionId: 'S1',
        params,
        commandId: 'c1',
      },
    );
    expect(a.effects).toEqual([]);
    expect(a.next).toEqual({
      ...IDLE_SNAPSHOT,
      stream: 'starting',
      streamingSessionId: 'S1',
      resolution: 2,
      aspectratio: 1,
      streamCommandId: 'c1',
    });
    const b = stepTo(a.next, settled('stream.start', 'acknowledged'), { now: 150 });
    expect(b.next).toMatchObject({ stream: 'streaming', streamStartedAt: 150, streamCommandId: null });
    expect(b.effects).toEqual([
      { kind: 'openInterval', streamingSessionId: 'S1', startedAt: 150 },
      {
        kind: 'emit',
        event: 'StreamStarted',
        fields: { streamingSessionId: 'S1', resolution: 2, aspectratio: 1 },
      },
    ]);
    const c = stepTo(
      b.next,
      { type: 'requestRecordStart' },
      { now: 200, recordingId: 'R1', commandId: 'c2' },
    );
    expect(c.next).toMatchObject({ recording: 'starting', recordingId: 'R1', recordingCommandId: 'c2' });
    const d = stepTo(c.next, settled('record.start', 'acknowledged'), { now: 210 });
    expect(d.next).toMatchObject({
      recording: 'recording',
      recordingStartedAt: 210,
      recordingCommandId: null,
    });
    expect(d.effects).toEqual([
      { kind: 'emit', event: 'RecordingStarted', fields: { recordingId: 'R1', streamingSessionId: 'S1' } },
    ]);
    const e = stepTo(d.next, { type: 'requestStreamStop' }, { now: 300, commandId: 'c3' });
    expect(e.next).toMatchObject({ stream: 'stopping', streamCommandId: 'c3', streamStartedAt: 150 });
    // A refused stop leaves the stream as it was, start time included.
    const refused = stepTo(e.next, settled('stream.stop', 'failed'), { now: 310 });
    expect(refused.next).toEqual(d.next);
    const f = stepTo(e.next, settled('stream.stop', 'acknowledged'), { now: 320 });
    expect(f.next).toEqual(IDLE_SNAPSHOT);
    expect(f.effects).toEqual([
      { kind: 'emit', event: 'RecordingStopped', fields: { recordingId: 'R1', streamingSessionId: 'S1' } },
      { kind: 'closeInterval', streamingSessionId: 'S1', stoppedAt: 320, reason: 'command' },
      { kind: 'emit', event: 'StreamStopped', fields: { streamingSessionId: 'S1', reason: 'command' } },
    ]);
  });

  it('an app stream stopped by a disconnect ends at the given time, never before it began', () => {
    const a = stepTo(
      IDLE_SNAPSHOT,
      { type: 'appStreamStart' },
      { now: 1000, streamingSessionId: 'S2', params },
    );
    expect(a.next).toMatchObject({ stream: 'streaming', streamStartedAt: 1000, streamCommandId: null });
    const b = stepTo(a.next, { type: 'disconnect' }, { now: 90_000, stoppedAt: 30_000 });
    expect(b.effects).toContainEqual({
      kind: 'closeInterval',
      streamingSessionId: 'S2',
      stoppedAt: 30_000,
      reason: 'disconnected',
    });
    const early = stepTo(a.next, { type: 'sessionEnd' }, { now: 90_000, stoppedAt: 500 });
    expect(early.effects).toContainEqual({
      kind: 'closeInterval',
      streamingSessionId: 'S2',
      stoppedAt: 1000,
      reason: 'session_ended',
    });
  });

  it('a stream that never started falls back to idle without events', () => {
    const a = stepTo(
      IDLE_SNAPSHOT,
      { type: 'requestStreamStart' },
      {
        now: 1,
        streamingSessionId: 'S3',
        params,
        commandId: 'c9',
      },
    );
    const b = stepTo(a.next, settled('stream.start', 'expired'), { now: 2 });
    expect(b).toEqual({ kind: 'next', next: IDLE_SNAPSHOT, effects: [] });
  });

  it('conflicts and ignored actions pass through; missing inputs are a programming error', () => {
    expect(advance(IDLE_SNAPSHOT, { type: 'requestStreamStop' }, { now: 1, commandId: 'c' })).toEqual({
      kind: 'conflict',
      code: 'not_streaming',
    });
    expect(advance(IDLE_SNAPSHOT, { type: 'sessionEnd' }, { now: 1 })).toEqual({ kind: 'ignored' });
    expect(() => advance(IDLE_SNAPSHOT, { type: 'appStreamStart' }, { now: 1, params })).toThrow(
      /streamingSessionId/,
    );
    expect(() =>
      advance(IDLE_SNAPSHOT, { type: 'requestStreamStart' }, { now: 1, params, streamingSessionId: 'S' }),
    ).toThrow(/commandId/);
  });
});
