/**
 * Values for JSON Schemas as the published document states them (the subset TypeBox writes: `type`,
 * `enum`, `anyOf`, `properties`/`required`/`additionalProperties`, string lengths, `pattern`,
 * `format: uuid`, number bounds, `items`/`minItems`/`maxItems`), as fast-check arbitraries, plus the
 * hostile values and mutations the fuzz pass throws at every route.
 *
 * Written here rather than taken from a package: `json-schema-fast-check` is archived and built on
 * fast-check 1, and `json-schema-faker` draws from its own random source, so its values could neither
 * be shrunk nor replayed from a fast-check seed. The subset above is all the document uses.
 */
import fc from 'fast-check';
import type { JsonSchema } from './openapi.ts';

/** Valid strings longer than this are not generated (hostile mutations bring the long ones). */
const MAX_VALID_LENGTH = 48;
const MAX_VALID_ITEMS = 4;

function nonNullBranches(schema: JsonSchema): JsonSchema[] | null {
  const union = (schema.anyOf ?? schema.oneOf) as JsonSchema[] | undefined;
  return union ? union.filter((s) => s.type !== 'null') : null;
}

function typesOf(schema: JsonSchema): string[] {
  if (Array.isArray(schema.type)) return schema.type as string[];
  if (typeof schema.type === 'string') return [schema.type];
  if (schema.properties) return ['object'];
  if (schema.items) return ['array'];
  return [];
}

function integerBounds(schema: JsonSchema) {
  let min = typeof schema.minimum === 'number' ? Math.ceil(schema.minimum) : -(2 ** 31);
  let max = typeof schema.maximum === 'number' ? Math.floor(schema.maximum) : 2 ** 31 - 1;
  if (typeof schema.exclusiveMinimum === 'number') min = Math.floor(schema.exclusiveMinimum) + 1;
  if (typeof schema.exclusiveMaximum === 'number') max = Math.ceil(schema.exclusiveMaximum) - 1;
  // A bound past 2^31 (timestamps) moves the other one along; stay within 2^32 of the lower bound:
  // a value millions of years ahead says nothing new.
  if (max < min) {
    if (typeof schema.maximum !== 'number') max = min + 2 ** 32;
    else min = max - 2 ** 32;
  }
  if (max - min > 2 ** 32) max = min + 2 ** 32;
  return { min, max };
}

function patternArbitrary(schema: JsonSchema, minLength: number, maxLength: number) {
  try {
    const re = new RegExp(String(schema.pattern));
    return fc
      .stringMatching(re, { maxLength })
      .filter((s) => [...s].length >= minLength && [...s].length <= maxLength);
  } catch {
    return fc.string({ minLength, maxLength });
  }
}

/** Values the schema accepts (as far as JSON Schema goes: semantic rules are the server's). */
export function validArbitrary(schema: JsonSchema, depth = 0): fc.Arbitrary<unknown> {
  if (depth > 12) return fc.constant(null);
  if ('const' in schema) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  const branches = (schema.anyOf ?? schema.oneOf) as JsonSchema[] | undefined;
  if (branches) return fc.oneof(...branches.map((b) => validArbitrary(b, depth + 1)));
  const types = typesOf(schema);
  if (types.length > 1)
    return fc.oneof(...types.map((type) => validArbitrary({ ...schema, type }, depth + 1)));
  switch (types[0]) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
      return fc.integer(integerBounds(schema));
    case 'number': {
      const { min, max } = integerBounds(schema);
      return fc.oneof(
        fc.integer({ min, max }),
        fc.double({ min, max, noNaN: true, noDefaultInfinity: true }),
      );
    }
    case 'string': {
      const minLength = Number(schema.minLength ?? 0);
      const maxLength = Math.max(
        minLength,
        Math.min(Number(schema.maxLength ?? MAX_VALID_LENGTH), MAX_VALID_LENGTH),
      );
      if (schema.format === 'uuid') return fc.uuid();
      if (schema.pattern) return patternArbitrary(schema, minLength, maxLength);
      return fc.oneof(
        { weight: 3, arbitrary: fc.string({ minLength, maxLength, unit: 'grapheme-ascii' }) },
        { weight: 1, arbitrary: fc.string({ minLength, maxLength, unit: 'grapheme' }) },
      );
    }
    case 'array': {
      const minLength = Number(schema.minItems ?? 0);
      const maxLength = Math.max(
        minLength,
        Math.min(Number(schema.maxItems ?? MAX_VALID_ITEMS), MAX_VALID_ITEMS),
      );
      const items = validArbitrary((schema.items ?? {}) as JsonSchema, depth + 1);
      return schema.uniqueItems
        ? fc.uniqueArray(items, { minLength, maxLength, selector: (v) => JSON.stringify(v) })
        : fc.array(items, { minLength, maxLength });
    }
    case 'object': {
      const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
      const required = (schema.required ?? []) as string[];
      const model: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [name, sub] of Object.entries(properties)) model[name] = validArbitrary(sub, depth + 1);
      const record = fc.record(model, { requiredKeys: required.filter((r) => r in model) });
      if (schema.additionalProperties && typeof schema.additionalProperties === 'object') {
        const extra = fc.dictionary(
          fc.string({ minLength: 1, maxLength: 12, unit: 'grapheme-ascii' }),
          validArbitrary(schema.additionalProperties as JsonSchema, depth + 1),
          { maxKeys: 3 },
        );
        return fc.tuple(record, extra).map(([r, e]) => ({ ...e, ...r }));
      }
      return record;
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/**
 * One small valid value, the same every time: required properties only, the first enum member or
 * union branch, the smallest number, the shortest string. Requests that must pass validation (the
 * authorization matrix's allowed callers) start from this.
 */
export function minimalValue(schema: JsonSchema): unknown {
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  if ('default' in schema) return schema.default;
  const branches = nonNullBranches(schema);
  if (branches) return branches.length > 0 ? minimalValue(branches[0]) : null;
  const types = typesOf(schema).filter((t) => t !== 'null');
  switch (types[0]) {
    case 'boolean':
      return false;
    case 'integer':
    case 'number': {
      const { min, max } = integerBounds(schema);
      return Math.min(Math.max(0, min), max);
    }
    case 'string': {
      if (schema.format === 'uuid') return '0190a6f4-9c3e-7000-8000-000000000000';
      const minLength = Math.max(1, Number(schema.minLength ?? 1));
      if (schema.pattern) {
        const [sample] = fc.sample(patternArbitrary(schema, minLength, Math.max(minLength, 16)), {
          seed: 1,
          numRuns: 1,
        });
        return sample;
      }
      return 'x'.repeat(minLength);
    }
    case 'array':
      return Array.from({ length: Number(schema.minItems ?? 0) }, () =>
        minimalValue((schema.items ?? {}) as JsonSchema),
      );
    case 'object': {
      const out: Record<string, unknown> = {};
      const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
      for (const name of (schema.required ?? []) as string[])
        out[name] = minimalValue(properties[name] ?? {});
      return out;
    }
    default:
      return null;
  }
}

// --- hostile input ---------------------------------------------------------------------------------

/** Text chosen to break parsers, templates, SQL built by hand, paths and number parsing. */
export const NASTY_STRINGS = [
  '',
  ' ',
  '\u0000',
  '\ud800',
  '\uffff',
  '\u202e\u0041',
  'é\u0301',
  '👩‍👩‍👧‍👦',
  '../../etc/passwd',
  "' OR '1'='1' --",
  '"; DROP TABLE sessions; --',
  '<script>alert(1)</script>',
  `{{7*7}}\${7*7}<%= 7*7 %>`,
  '{code}{reward.code}{achievement.code}{rewardTitle}',
  '%00%zz%',
  '__proto__',
  'constructor',
  'null',
  'undefined',
  'NaN',
  'Infinity',
  '-1',
  '0',
  '1e309',
  '99999999999999999999',
  '0x7fffffff',
  'true',
  'camera',
  'text',
  'Europe/Nowhere',
  'a'.repeat(129),
  'a'.repeat(4097),
];

/** Strings: nasty ones, arbitrary Unicode (lone surrogates included), and long ones (to ~200 kB). */
export const hostileString: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...NASTY_STRINGS) },
  { weight: 2, arbitrary: fc.string({ maxLength: 40, unit: 'binary' }) },
  { weight: 2, arbitrary: fc.string({ maxLength: 40, unit: 'grapheme' }) },
  { weight: 1, arbitrary: fc.integer({ min: 1_000, max: 200_000 }).map((n) => 'A'.repeat(n)) },
);

const hostileNumber = fc.oneof(
  fc.constantFrom(
    0,
    -0,
    -1,
    0.5,
    1e-320,
    1e308,
    -1e308,
    2 ** 31,
    -(2 ** 31) - 1,
    2 ** 53 + 2,
    -(2 ** 53) - 2,
  ),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

/** Nesting deep enough to trouble recursive validators and serializers (as JSON text, see `deepJson`). */
export const DEEP = Symbol('deep');
export interface Deep {
  [DEEP]: number;
}

export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: hostileString },
  { weight: 2, arbitrary: hostileNumber },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, [], {}) },
  { weight: 1, arbitrary: fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 6 }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.integer({ min: 50, max: 20_000 }).map((n): Deep => ({ [DEEP]: n })) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1_000, max: 20_000 }).map((n) => Array.from({ length: n }, () => 1)),
  },
);

/** Property names that mean something to JavaScript objects. */
const hostileKey = fc.oneof(
  fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', '', ' ', '$where'),
  fc.string({ maxLength: 20, unit: 'grapheme' }),
);

export type Mutation =
  | { kind: 'set'; at: number; value: unknown }
  | { kind: 'delete'; at: number }
  | { kind: 'extra'; at: number; key: string; value: unknown }
  | { kind: 'replace'; value: unknown };

export const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('set' as const), at: fc.nat(), value: hostileValue }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('extra' as const),
      at: fc.nat(),
      key: hostileKey,
      value: hostileValue,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('replace' as const), value: hostileValue }) },
);

/** Sets a property as an own, enumerable one: plain assignment of `__proto__` would set the prototype. */
function define(target: Record<string, unknown>, key: string, value: unknown) {
  Object.defineProperty(target, key, { value, enumerable: true, configurable: true, writable: true });
}

/** Every object and array inside `value` (itself first), for a mutation to pick one by index. */
function containers(value: unknown, out: (Record<string, unknown> | unknown[])[] = []) {
  if (value && typeof value === 'object' && !(DEEP in value)) {
    out.push(value as Record<string, unknown>);
    for (const child of Object.values(value)) containers(child, out);
  }
  return out;
}

/** `value` (a fresh copy) with one mutation applied somewhere inside it. */
export function applyMutation(value: unknown, m: Mutation): unknown {
  if (m.kind === 'replace') return m.value;
  const copy = structuredClone(value);
  const spots = containers(copy);
  if (spots.length === 0) return m.kind === 'set' ? m.value : copy;
  const spot = spots[m.at % spots.length];
  const keys = Object.keys(spot);
  if (Array.isArray(spot)) {
    if (m.kind === 'delete') spot.splice(m.at % Math.max(1, spot.length), 1);
    else if (m.kind === 'set' && spot.length > 0) spot[m.at % spot.length] = m.value;
    else spot.push(m.kind === 'extra' || m.kind === 'set' ? m.value : null);
    return copy;
  }
  if (m.kind === 'extra') define(spot, m.key, m.value);
  else if (keys.length === 0) define(spot, m.kind === 'set' ? 'x' : 'y', m.kind === 'set' ? m.value : null);
  else if (m.kind === 'delete') delete spot[keys[m.at % keys.length]];
  else define(spot, keys[m.at % keys.length], m.value);
  return copy;
}

/** JSON text for a value that may hold `Deep` markers (written as text: too deep for JSON.stringify). */
export function toJsonText(value: unknown): string {
  const marks: number[] = [];
  const text = JSON.stringify(value, (_key, v) => {
    if (v && typeof v === 'object' && DEEP in v) {
      marks.push((v as Deep)[DEEP]);
      return `\u0000deep${marks.length - 1}\u0000`;
    }
    return v;
  });
  if (text === undefined) return 'null';
  return text.replace(/"\\u0000deep(\d+)\\u0000"/g, (_, i: string) => {
    const n = marks[Number(i)];
    return n % 2 === 0 ? `${'['.repeat(n)}${']'.repeat(n)}` : `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;
  });
}
