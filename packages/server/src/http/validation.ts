import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { type FieldError, problems } from './problem.ts';

// ajv-formats ships CommonJS; its default export arrives wrapped under NodeNext.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

const common: Options = { allErrors: true, removeAdditional: false, useDefaults: true, strict: false };

/**
 * ajv-formats, with `int32` and `int64` as annotations: they give an integer's width in /openapi.json,
 * and every such schema bounds the integer with `minimum` and `maximum`, which are what is checked (a
 * value out of range gets one error, not two).
 */
function withFormats(ajv: Ajv): Ajv {
  addFormats(ajv);
  for (const name of ['int32', 'int64']) ajv.addFormat(name, { type: 'number', validate: () => true });
  return ajv;
}

/** Bodies are taken as sent: no coercion, unknown fields rejected by the schemas. */
export const bodyAjv = withFormats(new Ajv({ ...common, coerceTypes: false }));
/** Query strings and path parameters arrive as text, so they are coerced to the schema's types. */
const textAjv = withFormats(new Ajv({ ...common, coerceTypes: true }));

/**
 * A route's validator, compiled by Ajv on the route's first request rather than when the app starts.
 * Compiling every route's schemas (and serializers, `http/serialization.ts`) was most of a start: about
 * two seconds of CPU per app, paid again by every server a test starts and by every worker of
 * `--workers`, for routes most processes never serve. The first request on a route pays its compile
 * once (a few milliseconds); a schema Ajv refuses fails that request with a 500 instead of the start,
 * which the OpenAPI, authorization-matrix and fuzz tests, calling every route, would show.
 */
export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  const ajv = httpPart === 'body' ? bodyAjv : textAjv;
  return lazyValidator(() => ajv.compile(schema as object) as ValidateFunction);
};

/** A validate function that compiles itself on its first call and then hands its `errors` on, as Fastify reads them. */
export function lazyValidator(compile: () => ValidateFunction) {
  let compiled: ValidateFunction | undefined;
  const validate = (data: unknown): boolean => {
    compiled ??= compile();
    const valid = compiled(data) as boolean;
    validate.errors = compiled.errors;
    return valid;
  };
  validate.errors = null as ErrorObject[] | null | undefined;
  return validate;
}

/**
 * For Fastify's `schemaController.compilersFactory`: every schema controller (a plugin that calls
 * `addSchema` gets its own) then validates with our two Ajv instances, never Fastify's default
 * one (which would silently strip unknown fields and coerce body types).
 */
export function buildValidator(externalSchemas: unknown) {
  for (const schema of Object.values((externalSchemas ?? {}) as Record<string, { $id?: string }>)) {
    // Added once per process (and compiled when a route's validator first refers to it: asking
    // Ajv `getSchema` here would compile every shared schema at start).
    if (!schema.$id || sharedIds.has(schema.$id)) continue;
    sharedIds.add(schema.$id);
    for (const ajv of [bodyAjv, textAjv]) ajv.addSchema(schema);
  }
  return validatorCompiler;
}
const sharedIds = new Set<string>();

const MAX_REPORTED_ERRORS = 50;

/** `/events/3/timestamp` → `events[3].timestamp`. */
export function pointerToPath(pointer: string, prefix = ''): string {
  let out = prefix;
  for (const raw of pointer.split('/').slice(1)) {
    const seg = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (/^\d+$/.test(seg)) out += `[${seg}]`;
    else out += out === '' ? seg : `.${seg}`;
  }
  return out;
}

function joinPath(base: string, key: string): string {
  return base === '' ? key : `${base}.${key}`;
}

/** Turns ajv errors into our `errors[]` entries, most useful first, deduplicated. */
export function ajvErrorsToFieldErrors(errors: ErrorObject[], prefix = ''): FieldError[] {
  const out: FieldError[] = [];
  const seen = new Set<string>();
  for (const e of errors) {
    // anyOf/oneOf summaries repeat what their branches already said.
    if (e.keyword === 'anyOf' || e.keyword === 'oneOf' || e.keyword === 'if') continue;
    let path = pointerToPath(e.instancePath, prefix);
    let message = e.message ?? 'is invalid';
    if (e.keyword === 'required') {
      path = joinPath(path, String((e.params as { missingProperty: string }).missingProperty));
      message = 'is required';
    } else if (e.keyword === 'additionalProperties') {
      path = joinPath(path, String((e.params as { additionalProperty: string }).additionalProperty));
      message = 'is not an allowed field';
    } else if (e.keyword === 'enum') {
      const allowed = (e.params as { allowedValues: unknown[] }).allowedValues;
      message = `must be one of ${allowed.map((v) => JSON.stringify(v)).join(', ')}`;
    }
    const key = `${path}\u0000${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ path, message });
    if (out.length >= MAX_REPORTED_ERRORS) break;
  }
  return out;
}

const PART_PREFIX: Record<string, string> = {
  body: '',
  querystring: 'query',
  params: 'path',
  headers: 'headers',
};

export function validationProblem(errors: ErrorObject[], context: string) {
  const fieldErrors = ajvErrorsToFieldErrors(errors, PART_PREFIX[context] ?? '');
  const first = fieldErrors[0];
  const where = context === 'querystring' ? 'query string' : context === 'params' ? 'path' : context;
  const detail = first
    ? `The request ${where} is invalid: ${first.path || where} ${first.message}${fieldErrors.length > 1 ? ` (and ${fieldErrors.length - 1} more)` : ''}.`
    : `The request ${where} is invalid.`;
  return problems.validation(detail, fieldErrors);
}

/**
 * For routes whose handler validates the body itself (rules a JSON schema cannot state, or hot
 * paths with their own compiled validators): the body schema then only documents the route.
 */
export const handlerValidatesBody: FastifySchemaCompiler<unknown> = (route) =>
  route.httpPart === 'body' ? () => true : validatorCompiler(route);

/**
 * The first place in `value` where text holds U+0000, as an `errors[].path`, or null. PostgreSQL
 * cannot store that character in text, so it is refused as input on every store alike.
 */
export function findNul(value: unknown, path: string, depth = 0): string | null {
  if (typeof value === 'string') return value.includes('\u0000') ? path : null;
  if (!value || typeof value !== 'object' || depth > 64) return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findNul(value[i], `${path}[${i}]`, depth + 1);
      if (found !== null) return found;
    }
    return null;
  }
  for (const [key, child] of Object.entries(value)) {
    const at = path === '' ? key : `${path}.${key}`;
    if (key.includes('\u0000')) return at;
    const found = findNul(child, at, depth + 1);
    if (found !== null) return found;
  }
  return null;
}

/** Whether text anywhere in `value` (keys included) holds U+0000: `findNul` without building paths. */
function hasNul(value: unknown, depth = 0): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  if (!value || typeof value !== 'object' || depth > 64) return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (hasNul(value[i], depth + 1)) return true;
    return false;
  }
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (key.includes('\u0000') || hasNul(record[key], depth + 1)) return true;
  }
  return false;
}

/**
 * For a `preValidation` hook: a path parameter, query parameter or JSON body field holding U+0000 is
 * a 400 (thrown).
 */
export function refuseNul(request: { params: unknown; query: unknown; body: unknown }) {
  // The walk that names the place runs only when there is one (an event batch is thousands of values).
  if (!hasNul(request.params) && !hasNul(request.query) && !hasNul(request.body)) return;
  const at = findNul(request.params, 'path') ?? findNul(request.query, 'query') ?? findNul(request.body, '');
  if (at !== null) {
    throw problems.validation(`The request is invalid: ${at || 'body'} contains the character U+0000.`, [
      { path: at, message: 'must not contain the character U+0000' },
    ]);
  }
}
