/**
 * The device channel's messages (CONTRACT §2). Every message is a JSON object with a `type`.
 */

export type DeviceMessage =
  | { type: 'ack'; commandId: string; ok: boolean; error?: unknown }
  | { type: 'heartbeat' }
  | { type: 'events'; events: unknown; requestId?: string };

export type ServerMessage =
  | { type: 'welcome'; sessionId: string; heartbeatIntervalMs: number }
  | { type: 'command'; commandId: string; name: string; data: unknown; issuedAt: number }
  | { type: 'events.ack'; accepted: number; duplicates: number; requestId?: string }
  | {
      type: 'error';
      code: string;
      message: string;
      errors?: unknown;
      requestId?: string;
      commandId?: string;
    };

/** Close codes: the standard ones where they fit, 4xxx for liveline's own. */
export const CLOSE = {
  normal: 1000,
  tooBig: 1009,
  restart: 1012,
  replaced: 4001,
  forbidden: 4003,
  notFound: 4004,
  sessionEnded: 4009,
} as const;

/** The device's explanation of a refusal is kept with the command; it stays readable, not a payload. */
const MAX_ACK_ERROR = 4096;

export type ParseResult = { ok: true; message: DeviceMessage } | { ok: false; code: string; message: string };

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Parses and checks one frame; a bad frame is answered with an `error`, never a crash. */
export function parseDeviceMessage(raw: string): ParseResult {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return { ok: false, code: 'malformed_message', message: 'The message is not valid JSON.' };
  }
  if (!isObject(value) || typeof value.type !== 'string') {
    return {
      ok: false,
      code: 'malformed_message',
      message: 'A message is a JSON object with a string `type`.',
    };
  }
  switch (value.type) {
    case 'heartbeat':
      return { ok: true, message: { type: 'heartbeat' } };
    case 'ack': {
      const { commandId, ok, error } = value;
      if (typeof commandId !== 'string' || commandId === '' || typeof ok !== 'boolean') {
        return {
          ok: false,
          code: 'malformed_message',
          message: 'An ack is {type: "ack", commandId: string, ok: boolean, error?}.',
        };
      }
      if (error !== undefined && JSON.stringify(error).length > MAX_ACK_ERROR) {
        return {
          ok: false,
          code: 'malformed_message',
          message: `An ack's error may hold at most ${MAX_ACK_ERROR} characters of JSON.`,
        };
      }
      return { ok: true, message: { type: 'ack', commandId, ok, error } };
    }
    case 'events': {
      const requestId = value.requestId;
      if (requestId !== undefined && (typeof requestId !== 'string' || requestId.length > 128)) {
        return {
          ok: false,
          code: 'malformed_message',
          message: '`requestId` must be a string of at most 128 characters.',
        };
      }
      return { ok: true, message: { type: 'events', events: value.events, requestId } };
    }
    default:
      return {
        ok: false,
        code: 'unknown_message_type',
        message: `Unknown message type "${value.type.slice(0, 64)}"; expected ack, heartbeat or events.`,
      };
  }
}
