/**
 * The events of CONTRACT §5 (what a client may send) and §2 (what the server emits itself), as TypeBox
 * schemas. The server compiles one validator per client type and dispatches on `eventType`; the
 * `EventSchema` union and `EventBatchSchema` document the batch in /openapi.json; the SDK derives the
 * types of `track()` from the same schemas.
 *
 * Rules that a static schema cannot express (timestamp not more than 24 h ahead of the server clock,
 * `sessionId` equal to the path's) are the server's to check.
 */
import { type Static, type TSchema, Type } from 'typebox';
import { AspectRatioSchema, ResolutionSchema } from './enums.ts';

/** Client-sendable event types, in contract order. */
export const CLIENT_EVENT_TYPES = [
  'Custom',
  'Health',
  'Progression',
  'Business',
  'Resource',
  'Design',
  'Error',
  'Impression',
  'Screenshot',
  'SessionEnd',
] as const;
export type ClientEventType = (typeof CLIENT_EVENT_TYPES)[number];

/** Event types only the server emits; a client sending one gets 400 `validation_failed`. */
export const SERVER_EVENT_TYPES = [
  'StreamStarted',
  'StreamStopped',
  'RecordingStarted',
  'RecordingStopped',
] as const;
export type ServerEventType = (typeof SERVER_EVENT_TYPES)[number];

/** 2000-01-01T00:00:00Z: the earliest accepted event timestamp. */
export const MIN_EVENT_TIMESTAMP = 946_684_800_000;
/** How far ahead of the server clock an event timestamp may be. */
export const MAX_EVENT_FUTURE_MS = 24 * 60 * 60 * 1000;
/** Default (and documented) batch size; a server may be configured with another. */
export const DEFAULT_MAX_EVENTS_PER_BATCH = 1000;

export const MAX_EVENT_ID_LENGTH = 128;
export const MAX_EVENT_STRING_LENGTH = 1024;
export const MAX_ERROR_MESSAGE_LENGTH = 8192;

/** `[A-Za-z0-9_ -]{1,64}` levels, 1 to 4 of them, joined by `:`. */
export const DESIGN_EVENT_ID_PATTERN = '^[A-Za-z0-9_ -]{1,64}(?::[A-Za-z0-9_ -]{1,64}){0,3}$';
/** ISO 4217 alphabetic code: three uppercase letters. */
export const ISO_4217_PATTERN = '^[A-Z]{3}$';

// Integers beyond 2^53 lose precision in JSON consumers; bound them.
const SAFE_INT = { format: 'int64', minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER };
/** The latest instant a JavaScript `Date` holds: the bound of every timestamp in the schemas. */
export const MAX_TIMESTAMP = 8_640_000_000_000_000;
/** Characters of a canonical UUID. */
const UUID_LENGTH = 36;
const uuid = (description?: string) =>
  Type.String({ format: 'uuid', maxLength: UUID_LENGTH, ...(description ? { description } : {}) });
/** A Design event's `eventId`: 4 levels of 64 characters and 3 colons. */
const MAX_DESIGN_EVENT_ID_LENGTH = 4 * 64 + 3;

/** Optional free text (may be empty). */
const text = (description?: string) =>
  Type.String({ maxLength: MAX_EVENT_STRING_LENGTH, ...(description ? { description } : {}) });
/** Required free text (must not be empty). */
const reqText = (description?: string) =>
  Type.String({ minLength: 1, maxLength: MAX_EVENT_STRING_LENGTH, ...(description ? { description } : {}) });

/** The fields every client event has, whatever its type. */
export const EventCommonSchema = Type.Object({
  id: Type.String({
    minLength: 1,
    maxLength: MAX_EVENT_ID_LENGTH,
    description: 'Client-chosen event id, unique within the session (a repeat is counted as a duplicate).',
  }),
  timestamp: Type.Integer({
    format: 'int64',
    minimum: MIN_EVENT_TIMESTAMP,
    maximum: MAX_TIMESTAMP,
    description: 'Unix time in milliseconds; not before 2000-01-01, not more than 24 h ahead of the server.',
  }),
  sessionId: Type.Optional(uuid('If present, must equal the session id of the path.')),
});
export type EventCommon = Static<typeof EventCommonSchema>;

function eventSchema<T extends string, P extends Record<string, TSchema>>(
  eventType: T,
  description: string,
  fields: P,
  /** More JSON Schema keywords for the event object (a Screenshot's `anyOf`). */
  keywords: Record<string, unknown> = {},
) {
  return Type.Object(
    {
      id: EventCommonSchema.properties.id,
      eventType: Type.Literal(eventType),
      timestamp: EventCommonSchema.properties.timestamp,
      sessionId: EventCommonSchema.properties.sessionId,
      ...fields,
    },
    { ...keywords, additionalProperties: false, title: `${eventType}Event`, description },
  );
}

export const CustomEventSchema = eventSchema(
  'Custom',
  'User-defined event with up to 10 custom text fields.',
  {
    custom01: Type.Optional(text()),
    custom02: Type.Optional(text()),
    custom03: Type.Optional(text()),
    custom04: Type.Optional(text()),
    custom05: Type.Optional(text()),
    custom06: Type.Optional(text()),
    custom07: Type.Optional(text()),
    custom08: Type.Optional(text()),
    custom09: Type.Optional(text()),
    custom10: Type.Optional(text()),
  },
);

export const HealthEventSchema = eventSchema('Health', 'Periodic device health snapshot.', {
  fps: Type.Optional(Type.Number({ minimum: 0, description: 'Frames per second.' })),
  cpuUsage: Type.Optional(Type.Number({ minimum: 0, maximum: 100, description: 'CPU usage in percent.' })),
  batteryLevel: Type.Optional(
    Type.Number({ minimum: 0, maximum: 100, description: 'Battery level in percent.' }),
  ),
  memoryUsage: Type.Optional(Type.Number({ minimum: 0, description: 'Memory in use, in MB.' })),
  errorCount: Type.Optional(Type.Integer({ format: 'int64', minimum: 0, maximum: Number.MAX_SAFE_INTEGER })),
});

export const PROGRESSION_STATUSES = ['Start', 'Fail', 'Complete'] as const;
export const ProgressionEventSchema = eventSchema('Progression', 'Level or stage progress.', {
  progressionStatus: Type.Enum(PROGRESSION_STATUSES),
  progression01: reqText('First (top) progression level.'),
  progression02: Type.Optional(text()),
  progression03: Type.Optional(text()),
  score: Type.Optional(Type.Integer(SAFE_INT)),
});

export const BusinessEventSchema = eventSchema('Business', 'A real-money transaction.', {
  amount: Type.Integer({ ...SAFE_INT, description: 'Amount in minor units of the currency (e.g. cents).' }),
  // The pattern says three letters; the bound is every event string's, so a wrong code gets one error.
  currency: Type.String({
    pattern: ISO_4217_PATTERN,
    maxLength: MAX_EVENT_STRING_LENGTH,
    description: 'ISO 4217 code, e.g. "EUR".',
  }),
  itemType: reqText(),
  itemId: reqText(),
  cartType: Type.Optional(text()),
});

export const FLOW_TYPES = ['Sink', 'Source'] as const;
export const ResourceEventSchema = eventSchema('Resource', 'In-game resource flow (sink or source).', {
  flowType: Type.Enum(FLOW_TYPES),
  currency: reqText('In-game currency or resource name.'),
  amount: Type.Number({ exclusiveMinimum: 0 }),
  itemType: reqText(),
  itemId: reqText(),
});

export const DesignEventSchema = eventSchema(
  'Design',
  'Hierarchical design event: 1–4 category levels and a value.',
  {
    eventId: Type.String({
      pattern: DESIGN_EVENT_ID_PATTERN,
      maxLength: MAX_DESIGN_EVENT_ID_LENGTH,
      description: 'Up to 4 category levels joined by ":", each 1–64 characters of [A-Za-z0-9_ -].',
    }),
    value: Type.Optional(Type.Number()),
  },
);

export const ERROR_SEVERITIES = ['Critical', 'Error', 'Warning', 'Information', 'Debug'] as const;
export const ErrorEventSchema = eventSchema('Error', 'Error report with a severity.', {
  severity: Type.Enum(ERROR_SEVERITIES),
  message: Type.String({ minLength: 1, maxLength: MAX_ERROR_MESSAGE_LENGTH }),
});

export const ImpressionEventSchema = eventSchema('Impression', 'Ad or content impression.', {
  adNetwork: reqText(),
  adType: Type.Optional(text()),
  adPlacement: Type.Optional(text()),
  adId: Type.Optional(text()),
});

/** A `Screenshot` names its image: `imageUrl` (stored elsewhere), `imageId` (uploaded here), or both. */
export const SCREENSHOT_IMAGE_FIELDS = ['imageUrl', 'imageId'] as const;

// One of the two image fields is required: JSON Schema's `anyOf` of `required` beside the object's own
// keywords (the server reports it as one error naming both fields).
export const ScreenshotEventSchema = eventSchema(
  'Screenshot',
  'A screenshot taken on the device. It needs `imageUrl` or `imageId` (or both).',
  {
    imageUrl: Type.Optional(reqText('Where the image is, for a screenshot stored outside liveline.')),
    imageId: Type.Optional(reqText('The id of an image uploaded to liveline (CONTRACT §14).')),
    width: Type.Optional(
      Type.Integer({ format: 'int64', minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'Pixels.' }),
    ),
    height: Type.Optional(
      Type.Integer({ format: 'int64', minimum: 1, maximum: Number.MAX_SAFE_INTEGER, description: 'Pixels.' }),
    ),
    streamingSessionId: Type.Optional(uuid()),
  },
  // Each branch names its field with the empty schema (the event's `properties` say what it is), so
  // a reader of the branch alone, a linter say, finds the field it requires.
  { anyOf: SCREENSHOT_IMAGE_FIELDS.map((field) => ({ required: [field], properties: { [field]: {} } })) },
);

export const SessionEndEventSchema = eventSchema(
  'SessionEnd',
  'Session termination; from a device it ends the session.',
  {
    duration: Type.Optional(Type.Number({ minimum: 0, description: 'Session length in seconds.' })),
    reason: Type.Optional(text()),
  },
);

/** One schema per client event type; the server compiles each of them once. */
export const CLIENT_EVENT_SCHEMAS = {
  Custom: CustomEventSchema,
  Health: HealthEventSchema,
  Progression: ProgressionEventSchema,
  Business: BusinessEventSchema,
  Resource: ResourceEventSchema,
  Design: DesignEventSchema,
  Error: ErrorEventSchema,
  Impression: ImpressionEventSchema,
  Screenshot: ScreenshotEventSchema,
  SessionEnd: SessionEndEventSchema,
} as const satisfies Record<ClientEventType, TSchema>;

/** Any client-sendable event (documentation; validation dispatches on `eventType` instead). */
export const EventSchema = Type.Union(
  CLIENT_EVENT_TYPES.map((t) => CLIENT_EVENT_SCHEMAS[t]),
  { title: 'Event', description: 'An event sent by a client; the fields depend on `eventType`.' },
);

/** Request body of `POST /sessions/{SessionId}/Events` (documentation; the server validates per type). */
export const EventBatchSchema = Type.Object(
  {
    events: Type.Array(EventSchema, {
      minItems: 1,
      maxItems: DEFAULT_MAX_EVENTS_PER_BATCH,
      description: `1–${DEFAULT_MAX_EVENTS_PER_BATCH} events (\`LIVELINE_MAX_EVENTS_PER_BATCH\`).`,
    }),
  },
  { additionalProperties: false, title: 'EventBatch' },
);

// ---- server-emitted events (documentation of what the server stores and returns) ----

function serverEventSchema<T extends string, P extends Record<string, TSchema>>(
  eventType: T,
  description: string,
  fields: P,
) {
  return Type.Object(
    {
      id: Type.String({ minLength: 1, maxLength: MAX_EVENT_ID_LENGTH, description: 'Server-generated id.' }),
      eventType: Type.Literal(eventType),
      timestamp: Type.Integer({
        format: 'int64',
        minimum: 0,
        maximum: MAX_TIMESTAMP,
        description: 'Server time, Unix milliseconds.',
      }),
      sessionId: uuid(),
      ...fields,
    },
    { title: `${eventType}Event`, description: `${description} Emitted by the server only.` },
  );
}

export const SERVER_EVENT_SCHEMAS = {
  StreamStarted: serverEventSchema('StreamStarted', 'A stream began.', {
    streamingSessionId: uuid(),
    resolution: ResolutionSchema,
    aspectratio: AspectRatioSchema,
  }),
  StreamStopped: serverEventSchema('StreamStopped', 'A stream ended.', {
    streamingSessionId: uuid(),
    reason: text('`command`, `app`, `disconnected`, …'),
  }),
  RecordingStarted: serverEventSchema('RecordingStarted', 'A recording began.', {
    recordingId: uuid(),
    streamingSessionId: uuid(),
  }),
  RecordingStopped: serverEventSchema('RecordingStopped', 'A recording ended.', {
    recordingId: uuid(),
    streamingSessionId: uuid(),
  }),
} as const satisfies Record<ServerEventType, TSchema>;

/** Any event the server emits itself. */
export const ServerEventSchema = Type.Union(
  SERVER_EVENT_TYPES.map((t) => SERVER_EVENT_SCHEMAS[t]),
  { title: 'ServerEvent', description: 'An event the server emits; the fields depend on `eventType`.' },
);

type CommonKey = 'id' | 'eventType' | 'timestamp' | 'sessionId';

type SchemaFields<K extends ClientEventType> = Omit<Static<(typeof CLIENT_EVENT_SCHEMAS)[K]>, CommonKey>;

/** A screenshot's fields with one of `imageUrl` and `imageId` required (the schema's `anyOf`). */
type ScreenshotFields = Omit<SchemaFields<'Screenshot'>, 'imageUrl' | 'imageId'> &
  ({ imageUrl: string; imageId?: string } | { imageUrl?: string; imageId: string });

/** The fields each client event type carries beyond the common ones, by type. */
export type ClientEventFields = {
  [K in ClientEventType]: K extends 'Screenshot' ? ScreenshotFields : SchemaFields<K>;
};

/** The fields each server-emitted event type carries beyond the common ones, by type. */
export type ServerEventFields = {
  [K in ServerEventType]: Omit<Static<(typeof SERVER_EVENT_SCHEMAS)[K]>, CommonKey>;
};
