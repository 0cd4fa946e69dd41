/**
 * The device channel's messages (CONTRACT §2) are defined in `@liveline/protocol`; this file compiles
 * the server's reader of device frames from them and says what a bad frame is answered with.
 */
import {
  CloseCode,
  compileFrameReader,
  DEVICE_MESSAGE_SCHEMAS,
  type DeviceMessage,
  type ErrorMessage,
  type ServerMessage as ProtocolServerMessage,
} from '@liveline/protocol';
import { findNul } from '../../http/validation.ts';

export type { DeviceMessage } from '@liveline/protocol';

/**
 * What the server writes. An `error`'s `errors` is left open here because ingestion's problems carry
 * their field errors untyped (`wire.ts`); on the wire they are `FieldError[]`. A `rate_limited` error
 * also says when to retry (`retryAfterS`, as HTTP's `Retry-After`).
 */
export type ServerMessage =
  | Exclude<ProtocolServerMessage, { type: 'error' }>
  | (Omit<ErrorMessage, 'errors'> & { errors?: unknown });

/** Close codes: the standard ones where they fit, 4xxx for liveline's own. */
export const CLOSE = CloseCode;

export type ParseResult = { ok: true; message: DeviceMessage } | { ok: false; code: string; message: string };

const readFrame = compileFrameReader<DeviceMessage>(DEVICE_MESSAGE_SCHEMAS);
const TYPES = Object.keys(DEVICE_MESSAGE_SCHEMAS)
  .join(', ')
  .replace(/, (\w+)$/, ' or $1');

/** Parses and checks one frame; a bad frame is answered with an `error`, never a crash. */
export function parseDeviceMessage(raw: string): ParseResult {
  const reading = readFrame(raw);
  switch (reading.kind) {
    case 'message': {
      // PostgreSQL cannot store U+0000 in text: refused as input on every store, as over HTTP. JSON
      // carries it escaped, so only a frame holding that escape is looked through.
      const at = raw.includes('\\u0000') ? findNul(reading.message, '') : null;
      if (at !== null) {
        return {
          ok: false,
          code: 'validation_failed',
          message: `The message is invalid: \`${at}\` contains the character U+0000.`,
        };
      }
      return { ok: true, message: reading.message };
    }
    case 'notJson':
      return { ok: false, code: 'malformed_message', message: 'The message is not valid JSON.' };
    case 'notMessage':
      return {
        ok: false,
        code: 'malformed_message',
        message: 'A message is a JSON object with a string `type`.',
      };
    case 'unknownType':
      return {
        ok: false,
        code: 'unknown_message_type',
        message: `Unknown message type "${reading.type.slice(0, 64)}"; expected ${TYPES}.`,
      };
    case 'invalid': {
      const problems = reading.errors
        .map(({ path, message }) => (path ? `\`${path}\` ${message}` : message))
        .join('; ');
      return {
        ok: false,
        code: 'malformed_message',
        message: `Invalid ${reading.type} message: ${problems}.`,
      };
    }
  }
}
