/**
 * The device channel (CONTRACT §2): WebSocket `/client/v1/sessions/{sessionId}/realtime`. Every message
 * is a JSON object with a `type`. Objects allow fields they do not name, so either end may grow a field
 * without breaking the other; a message of a type the reader does not know is the reader's to ignore
 * (the SDK) or to refuse (the server).
 */
import { type Static, Type } from 'typebox';

/** Close codes: the standard ones where they fit, 4xxx for liveline's own. */
export const CloseCode = {
  /** Either end closed on purpose (the SDK's `disconnect()`). */
  normal: 1000,
  /** Reserved: a message broke a rule of the channel badly enough to end it. */
  policyViolation: 1008,
  /** A frame exceeded the server's limit. */
  tooBig: 1009,
  /** The server is restarting; reconnect at once. */
  restart: 1012,
  /** A newer connection to the same session took over; do not reconnect. */
  replaced: 4001,
  /** The session belongs to another player, or the token was revoked; do not reconnect with it. */
  forbidden: 4003,
  /** No such session. */
  notFound: 4004,
  /** The session has ended. */
  sessionEnded: 4009,
  /** The token expired while the socket was open: reconnect with a new token (as graphql-ws's 4401). */
  tokenExpired: 4401,
} as const;
export type CloseCode = (typeof CloseCode)[keyof typeof CloseCode];

/** The server's default limit of one frame (`LIVELINE_WS_MAX_MESSAGE_BYTES`); larger ones close with 1009. */
export const DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024;
/** An ack's `error` is the device's readable explanation, kept with the command: not a payload. */
export const MAX_ACK_ERROR_JSON_LENGTH = 4096;
/** Longest `requestId` of an `events` message. */
export const MAX_REQUEST_ID_LENGTH = 128;

// ---- device → server ----------------------------------------------------------------------------------

const fitsAckError = (error: unknown) => (JSON.stringify(error)?.length ?? 0) <= MAX_ACK_ERROR_JSON_LENGTH;

export const AckMessageSchema = Type.Object(
  {
    type: Type.Literal('ack'),
    commandId: Type.String({ minLength: 1 }),
    ok: Type.Boolean(),
    error: Type.Optional(
      Type.Refine(
        Type.Unknown({ description: 'Why the device refused the command (with `ok: false`).' }),
        fitsAckError,
        () => `must hold at most ${MAX_ACK_ERROR_JSON_LENGTH} characters of JSON`,
      ),
    ),
  },
  { description: 'The device’s answer to a command: `ok: true`, or `ok: false` with an `error`.' },
);
export type AckMessage = Static<typeof AckMessageSchema>;

export const HeartbeatMessageSchema = Type.Object(
  { type: Type.Literal('heartbeat') },
  { description: 'Device contact; sent every `heartbeatIntervalMs`.' },
);
export type HeartbeatMessage = Static<typeof HeartbeatMessageSchema>;

export const EventsMessageSchema = Type.Object(
  {
    type: Type.Literal('events'),
    // Checked by the events module with the rules (and error paths) of HTTP ingestion, so that a bad
    // batch is answered by an `error` that carries the `requestId`, like any refused batch.
    events: Type.Optional(Type.Unknown({ description: 'The batch: `[...]` as in `POST .../Events`.' })),
    requestId: Type.Optional(
      Type.String({
        maxLength: MAX_REQUEST_ID_LENGTH,
        description: 'Echoed in the `events.ack` or `error` that answers this batch.',
      }),
    ),
  },
  { description: 'An event batch, answered by `events.ack` or `error`.' },
);
export type EventsMessage = Static<typeof EventsMessageSchema>;

/** Device → server, by `type`. */
export const DEVICE_MESSAGE_SCHEMAS = {
  ack: AckMessageSchema,
  heartbeat: HeartbeatMessageSchema,
  events: EventsMessageSchema,
} as const;
export type DeviceMessage = AckMessage | HeartbeatMessage | EventsMessage;
export type DeviceMessageType = DeviceMessage['type'];

// ---- server → device ----------------------------------------------------------------------------------

export const WelcomeMessageSchema = Type.Object(
  {
    type: Type.Literal('welcome'),
    sessionId: Type.String(),
    heartbeatIntervalMs: Type.Integer({ minimum: 1, description: 'How often the device sends `heartbeat`.' }),
  },
  { description: 'The first message of a connection: the channel is ready.' },
);
export type WelcomeMessage = Static<typeof WelcomeMessageSchema>;

export const CommandMessageSchema = Type.Object(
  {
    type: Type.Literal('command'),
    commandId: Type.String({ minLength: 1 }),
    name: Type.String({
      minLength: 1,
      description:
        '`stream.start`, `stream.stop`, `record.start`, `record.stop`, `camera`, `text`, or a custom name.',
    }),
    data: Type.Unknown({
      description: 'Depends on `name`; a custom command’s data is as the tenant sent it.',
    }),
    issuedAt: Type.Integer({ description: 'Unix ms, when the server accepted the command.' }),
  },
  { description: 'A command for the app; answered by `ack`. Sent again on reconnect until answered.' },
);
export type CommandMessage = Static<typeof CommandMessageSchema>;

export const CommandCancelMessageSchema = Type.Object(
  {
    type: Type.Literal('command.cancel'),
    commandId: Type.String({ minLength: 1 }),
  },
  {
    description:
      'The tenant cancelled a command sent earlier (it is `cancelled`): do not start it, or undo it. ' +
      'No answer is expected; an ack for it changes nothing.',
  },
);
export type CommandCancelMessage = Static<typeof CommandCancelMessageSchema>;

export const EventsAckMessageSchema = Type.Object(
  {
    type: Type.Literal('events.ack'),
    accepted: Type.Integer({ minimum: 0 }),
    duplicates: Type.Integer({ minimum: 0 }),
    requestId: Type.Optional(Type.String({ maxLength: MAX_REQUEST_ID_LENGTH })),
  },
  { description: 'The batch is stored (as a 200 to `POST .../Events`).' },
);
export type EventsAckMessage = Static<typeof EventsAckMessageSchema>;

export const FieldErrorSchema = Type.Object({
  path: Type.String({ description: 'Where, e.g. `events[3].timestamp`.' }),
  message: Type.String(),
});
export type FieldError = Static<typeof FieldErrorSchema>;

export const ErrorMessageSchema = Type.Object(
  {
    type: Type.Literal('error'),
    code: Type.String({ description: 'Stable snake_case code, as in problem documents.' }),
    message: Type.String(),
    errors: Type.Optional(Type.Array(FieldErrorSchema)),
    requestId: Type.Optional(
      Type.String({ maxLength: MAX_REQUEST_ID_LENGTH, description: 'The `events` message refused.' }),
    ),
    commandId: Type.Optional(Type.String({ description: 'The command whose `ack` is refused.' })),
    retryAfterS: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 3600,
        description: 'With `rate_limited`: seconds until the budget allows the frame again.',
      }),
    ),
  },
  { description: 'A message was refused: a bad frame, a refused batch, an ack the server cannot take.' },
);
export type ErrorMessage = Static<typeof ErrorMessageSchema>;

/** Server → device, by `type`. */
export const SERVER_MESSAGE_SCHEMAS = {
  welcome: WelcomeMessageSchema,
  command: CommandMessageSchema,
  'command.cancel': CommandCancelMessageSchema,
  'events.ack': EventsAckMessageSchema,
  error: ErrorMessageSchema,
} as const;
export type ServerMessage =
  | WelcomeMessage
  | CommandMessage
  | CommandCancelMessage
  | EventsAckMessage
  | ErrorMessage;
export type ServerMessageType = ServerMessage['type'];
