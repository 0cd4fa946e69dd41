import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { type FieldError, problems } from './problem.ts';

// ajv-formats ships CommonJS; its default export arrives wrapped under NodeNext.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

const common: Options = { allErrors: true, removeAdditional: false, useDefaults: true, strict: false };

/** Bodies are taken as sent: no coercion, unknown fields rejected by the schemas. */
export const bodyAjv = addFormats(new Ajv({ ...common, coerceTypes: false }));
/** Query strings and path parameters arrive as text, so they are coerced to the schema's types. */
const textAjv = addFormats(new Ajv({ ...common, coerceTypes: true }));

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  const ajv = httpPart === 'body' ? bodyAjv : textAjv;
  return ajv.compile(schema as object) as ValidateFunction;
};

/**
 * For Fastify's `schemaController.compilersFactory`: every schema controller (a plugin that calls
 * `addSchema` gets its own) then validates with our two Ajv instances, never Fastify's default
 * one (which would silently strip unknown fields and coerce body types).
 */
export function buildValidator(externalSchemas: unknown) {
  for (const schema of Object.values((externalSchemas ?? {}) as Record<string, { $id?: string }>)) {
    for (const ajv of [bodyAjv, textAjv]) {
      if (schema.$id && !ajv.getSchema(schema.$id)) ajv.addSchema(schema);
    }
  }
  return validatorCompiler;
}

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
