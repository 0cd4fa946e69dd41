import type {} from '@fastify/swagger';
import { Type } from 'typebox';

/** Shared schema pieces. Route schemas are the single source of validation, types and /openapi.json. */

export const Uuid = Type.String({
  format: 'uuid',
  description: 'A UUID (v7 for ids this server allocates).',
});

export const ProblemSchema = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: Type.String({ description: 'Stable, snake_case error code.' }),
    errors: Type.Optional(Type.Array(Type.Object({ path: Type.String(), message: Type.String() }))),
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
