import type { TSchema } from 'typebox';
import { Compile } from 'typebox/compile';
import type { FieldError } from './messages.ts';

/** What one text frame turned out to be. */
export type FrameReading<M> =
  | { kind: 'message'; message: M }
  | { kind: 'notJson' }
  /** JSON, but not an object with a string `type`. */
  | { kind: 'notMessage' }
  | { kind: 'unknownType'; type: string }
  /** A known type whose fields break its schema; `errors` say how (paths like `requestId`). */
  | { kind: 'invalid'; type: string; value: Record<string, unknown>; errors: FieldError[] };

export type FrameReader<M> = (text: string) => FrameReading<M>;

const MAX_REPORTED_ERRORS = 5;

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** `/a/0/b` (JSON pointer) → `a[0].b`. */
function pathOf(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path ? `${path}.${part}` : part), '');
}

/**
 * Compiles one validator per message type, once, and returns a reader of frames: JSON, an object with
 * a string `type`, then that type's schema. `M` must be the union of the schemas' static types
 * (`DeviceMessage` for `DEVICE_MESSAGE_SCHEMAS`, `ServerMessage` for `SERVER_MESSAGE_SCHEMAS`).
 */
export function compileFrameReader<M extends { type: string }>(
  schemas: Readonly<Record<M['type'], TSchema>>,
): FrameReader<M> {
  const validators = new Map(
    Object.entries<TSchema>(schemas).map(([type, schema]) => [type, Compile(schema)]),
  );
  return (text) => {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return { kind: 'notJson' };
    }
    if (!isObject(value) || typeof value.type !== 'string') return { kind: 'notMessage' };
    const type = value.type;
    const validator = validators.get(type);
    if (!validator) return { kind: 'unknownType', type };
    // The validator was compiled from the schema of this very `type`, whose static type is in `M`.
    if (validator.Check(value)) return { kind: 'message', message: value as unknown as M };
    const errors = validator
      .Errors(value)
      .slice(0, MAX_REPORTED_ERRORS)
      .map((e) => ({ path: pathOf(e.instancePath), message: e.message }));
    return { kind: 'invalid', type, value: value as Record<string, unknown>, errors };
  };
}
