import { Type } from 'typebox';

/**
 * A string enumeration as `{type: "string", enum: [...]}`: the form the server has always published in
 * /openapi.json (TypeBox's own `Type.Enum` leaves out `type`), typed as the union of its values.
 */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  options: { description?: string } = {},
) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}
