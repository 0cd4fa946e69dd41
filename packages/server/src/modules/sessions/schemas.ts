import { Type } from 'typebox';
import { StringEnum, Uuid } from '../../http/schemas.ts';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

export const CohortId = Type.String({
  minLength: 1,
  maxLength: 128,
  description: 'TenantCohortId, defined by the tenant.',
});

export const DeviceInfo = Type.Object(
  {
    model: Type.Optional(Type.String({ maxLength: 128 })),
    os: Type.Optional(Type.String({ maxLength: 128 })),
    sdkVersion: Type.Optional(Type.String({ maxLength: 64 })),
    appVersion: Type.Optional(Type.String({ maxLength: 64 })),
  },
  { additionalProperties: false },
);

export const SessionSchema = Type.Object(
  {
    sessionId: Uuid,
    tenantCohortId: Nullable(Type.String()),
    playerId: Type.String(),
    device: DeviceInfo,
    status: StringEnum(['live', 'ended']),
    connected: Type.Boolean({ description: 'Whether the device holds a realtime connection right now.' }),
    startedAt: Type.Integer(),
    lastSeenAt: Type.Integer(),
    endedAt: Nullable(Type.Integer()),
    endReason: Nullable(Type.String({ description: '`device`, `idle`, or the reason a device sent.' })),
    stream: Type.Object({
      state: StringEnum(['idle', 'starting', 'streaming', 'stopping']),
      streamingSessionId: Nullable(Type.String()),
      resolution: Nullable(Type.Integer()),
      aspectratio: Nullable(Type.Integer()),
      startedAt: Nullable(Type.Integer()),
    }),
    recording: Type.Object({
      state: StringEnum(['idle', 'starting', 'recording', 'stopping']),
      recordingId: Nullable(Type.String()),
      startedAt: Nullable(Type.Integer()),
    }),
  },
  { $id: 'Session' },
);

export const Minutes = Type.Integer({
  minimum: 1,
  maximum: 10080,
  description: 'Active within the last N minutes (default 5).',
});
export const MinutesBody = Type.Object(
  { minutes: Type.Optional(Type.Integer({ minimum: 1, maximum: 10080 })) },
  { additionalProperties: false },
);
