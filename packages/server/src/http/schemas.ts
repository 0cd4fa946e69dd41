import type {} from '@fastify/swagger';
import { type TSchema, Type } from 'typebox';

/**
 * Shared schema pieces. Route schemas are the single source of validation, types and /openapi.json.
 *
 * Every string has a `maxLength` (or is an enum or a constant), every integer a `format` and bounds,
 * every array a `maxItems`: the limits the server enforces on what it takes, and the most it sends
 * (docs/api.md, "The API description"). Build schemas from these pieces rather than from a bare
 * `Type.String()` or `Type.Integer()`: `npm run lint:api` refuses an unbounded one.
 */

/** Characters of a canonical UUID (`8-4-4-4-12` hex digits). */
export const UUID_LENGTH = 36;

export const Uuid = Type.String({
  format: 'uuid',
  maxLength: UUID_LENGTH,
  description: 'A UUID (v7 for ids this server allocates).',
});

/** The latest instant a JavaScript `Date` holds (+275760-09-13), in Unix milliseconds. */
export const MAX_TIMESTAMP = 8_640_000_000_000_000;

/** A point in time as Unix milliseconds (CONTRACT §0). */
export const Timestamp = (description = 'Unix milliseconds.') =>
  Type.Integer({ format: 'int64', minimum: 0, maximum: MAX_TIMESTAMP, description });

/** A count or a length: a non-negative integer no JSON consumer loses precision on. */
export const Count = (description?: string) =>
  Type.Integer({
    format: 'int64',
    minimum: 0,
    maximum: Number.MAX_SAFE_INTEGER,
    ...(description ? { description } : {}),
  });

/** An integer within 32-bit bounds. */
export const Int32 = (minimum: number, maximum: number, description?: string) =>
  Type.Integer({ format: 'int32', minimum, maximum, ...(description ? { description } : {}) });

/** Text of at most `maxLength` characters (`minLength` 1 unless given). */
export const Text = (maxLength: number, options: { minLength?: number; description?: string } = {}) =>
  Type.String({ minLength: options.minLength ?? 1, maxLength, ...withDescription(options.description) });

/** An absolute URL the server built or stored (responses only: requests check URLs in their handlers). */
export const UrlOut = (maxLength: number, description?: string) =>
  Type.String({ format: 'uri', maxLength, ...withDescription(description) });

export function Nullable<T extends TSchema>(schema: T) {
  return Type.Union([schema, Type.Null()]);
}

function withDescription(description: string | undefined) {
  return description ? { description } : {};
}

/** Most `errors` entries one problem document carries; the rest are left out (`problem.ts`). */
export const MAX_PROBLEM_ERRORS = 200;
/** Longest `detail` of a problem document, and of an entry's `path` and `message`. */
export const MAX_PROBLEM_DETAIL = 2048;
export const MAX_PROBLEM_FIELD = 1024;

export const ProblemSchema = Type.Object(
  {
    type: Type.String({ format: 'uri-reference', maxLength: 2048, description: '`about:blank`.' }),
    title: Type.String({ maxLength: 128, description: 'The HTTP status text.' }),
    status: Int32(400, 599),
    detail: Type.String({ maxLength: MAX_PROBLEM_DETAIL }),
    code: Type.String({
      pattern: '^[a-z][a-z0-9_]*$',
      maxLength: 64,
      description: 'Stable, snake_case error code.',
    }),
    errors: Type.Optional(
      Type.Array(
        Type.Object({
          path: Type.String({
            maxLength: MAX_PROBLEM_FIELD,
            description: 'Where, e.g. `events[3].timestamp`, `query.minutes`, `path.SessionId`.',
          }),
          message: Type.String({ maxLength: MAX_PROBLEM_FIELD }),
        }),
        { maxItems: MAX_PROBLEM_ERRORS },
      ),
    ),
  },
  {
    $id: 'Problem',
    description: 'RFC 9457 problem document (application/problem+json).',
    additionalProperties: true,
  },
);

/** The problem responses most routes can give, for the OpenAPI document. */
export function problemResponses(...statuses: number[]) {
  const out: Record<number, unknown> = {};
  for (const s of statuses) out[s] = Type.Ref('Problem');
  return out;
}

export const EmptyObject = Type.Object({}, { additionalProperties: false });

/** A string enum as plain JSON Schema (`enum`), typed as the union of its values. */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  options: { description?: string } = {},
) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}
