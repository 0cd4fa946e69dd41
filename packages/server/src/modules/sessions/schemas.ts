import { AspectRatioSchema, MAX_EVENT_STRING_LENGTH, ResolutionSchema } from '@liveline/protocol';
import { Type } from 'typebox';
import { Int32, Nullable, StringEnum, Timestamp, Uuid } from '../../http/schemas.ts';

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

/** A player id as the tenant chose it (CONTRACT §1). */
const PlayerId = Type.String({ minLength: 1, maxLength: 128, pattern: '^[^\\s]+$' });

export const SessionSchema = Type.Object(
  {
    sessionId: Uuid,
    tenantCohortId: Nullable(CohortId),
    playerId: PlayerId,
    device: DeviceInfo,
    status: StringEnum(['live', 'ended']),
    connected: Type.Boolean({ description: 'Whether the device holds a realtime connection right now.' }),
    startedAt: Timestamp(),
    lastSeenAt: Timestamp(),
    endedAt: Nullable(Timestamp()),
    endReason: Nullable(
      Type.String({
        maxLength: MAX_EVENT_STRING_LENGTH,
        description: '`device`, `idle`, or the reason a device sent.',
      }),
    ),
    stream: Type.Object({
      state: StringEnum(['idle', 'starting', 'streaming', 'stopping']),
      streamingSessionId: Nullable(Uuid),
      resolution: Nullable(ResolutionSchema),
      aspectratio: Nullable(AspectRatioSchema),
      startedAt: Nullable(Timestamp()),
    }),
    recording: Type.Object({
      state: StringEnum(['idle', 'starting', 'recording', 'stopping']),
      recordingId: Nullable(Uuid),
      startedAt: Nullable(Timestamp()),
    }),
  },
  { $id: 'Session' },
);

export const Minutes = Int32(1, 10080, 'Active within the last N minutes (default 5).');
export const MinutesBody = Type.Object(
  { minutes: Type.Optional(Int32(1, 10080)) },
  { additionalProperties: false },
);
