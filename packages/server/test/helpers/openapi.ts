/**
 * The published API description as tests read it: `/openapi.json` from a running server, turned
 * into one `Operation` per method and path with who may call it (from its security requirement),
 * its path and query parameters, its request body and how its errors look. The authorization
 * matrix and the fuzz pass are generated from this, so a new route is covered by both without
 * anyone writing a case for it.
 */

// biome-ignore lint/suspicious/noExplicitAny: JSON Schema is open-ended; callers narrow what they read.
export type JsonSchema = Record<string, any>;

export interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, JsonSchema>>;
  components?: { schemas?: Record<string, JsonSchema>; securitySchemes?: Record<string, JsonSchema> };
}

/** Who may call an operation, read from its security requirement. `null` is a public route. */
export interface Callers {
  operator: boolean;
  device: boolean;
  /** The scopes of which a tenant token needs one; `null` when tenant tokens are not accepted. */
  tenantScopes: string[] | null;
}

export interface QueryParameter {
  name: string;
  required: boolean;
  schema: JsonSchema;
}

export interface Operation {
  method: string;
  /** The path template as published, e.g. `/sessions/{SessionId}/events`. */
  path: string;
  /** `METHOD path`, the operation's name in test output. */
  key: string;
  operationId: string | null;
  callers: Callers | null;
  pathParams: string[];
  /** The schema of each path parameter (by name), where the document gives one. */
  pathSchemas: Record<string, JsonSchema>;
  query: QueryParameter[];
  body: { contentType: string; schema: JsonSchema; required: boolean } | null;
  /** How the route's 4xx answers look: RFC 9457 problem documents, or RFC 6749 §5.2 (`/oauth/token`). */
  errorStyle: 'problem' | 'oauth';
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

export async function fetchDocument(base: string): Promise<OpenApiDocument> {
  const res = await fetch(`${base}/openapi.json`);
  if (res.status !== 200) throw new Error(`/openapi.json answered ${res.status}`);
  return (await res.json()) as OpenApiDocument;
}

/** Inlines the document's own `#/...` references (it has no recursive ones). */
export function resolveRefs(schema: unknown, doc: OpenApiDocument, depth = 0): JsonSchema {
  if (depth > 50) throw new Error('schema nesting deeper than 50: a recursive $ref?');
  if (Array.isArray(schema)) return schema.map((s) => resolveRefs(s, doc, depth + 1)) as never;
  if (!schema || typeof schema !== 'object') return schema as JsonSchema;
  const s = schema as JsonSchema;
  if (typeof s.$ref === 'string') {
    // A JSON pointer into the document (`#/components/schemas/Problem`, `#/components/headers/...`).
    let target: unknown = doc;
    for (const part of s.$ref.replace(/^#\//, '').split('/')) {
      const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
      target = target && typeof target === 'object' ? (target as JsonSchema)[key] : undefined;
    }
    if (!s.$ref.startsWith('#/') || target === undefined) throw new Error(`unresolved $ref ${s.$ref}`);
    return resolveRefs(target, doc, depth + 1);
  }
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(s)) out[k] = resolveRefs(v, doc, depth + 1);
  return out;
}

/**
 * Who may call an operation, from its `security` (CONTRACT §1): `operatorToken`, `tenantToken` with
 * the scopes it needs (any one of them), `deviceToken`. No requirement (or an empty one) is a public
 * route. A scheme this function does not know is an error: a new kind of caller needs the matrix too.
 */
export function callersOf(operation: JsonSchema): Callers | null {
  const security = operation.security as Record<string, string[]>[] | undefined;
  if (!security || security.length === 0) return null;
  const callers: Callers = { operator: false, device: false, tenantScopes: null };
  for (const requirement of security) {
    const schemes = Object.keys(requirement);
    // `{}` in the list would make the route optionally public: the matrix has no such route.
    if (schemes.length !== 1) throw new Error(`security requirement ${JSON.stringify(requirement)}`);
    const [scheme] = schemes;
    if (scheme === 'operatorToken') callers.operator = true;
    else if (scheme === 'deviceToken') callers.device = true;
    else if (scheme === 'tenantToken') {
      const scopes = requirement[scheme];
      if (scopes.length === 0) throw new Error('a tenantToken requirement without a scope');
      callers.tenantScopes = [...(callers.tenantScopes ?? []), ...scopes];
    } else throw new Error(`unknown security scheme ${scheme}`);
  }
  return callers;
}

/** Every operation of the document, in document order. */
export function operationsOf(doc: OpenApiDocument): Operation[] {
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, raw] of Object.entries(item)) {
      if (!METHODS.includes(method)) continue;
      const op = resolveRefs(raw, doc);
      const parameters = (op.parameters ?? []) as JsonSchema[];
      const pathParams = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      const pathSchemas: Record<string, JsonSchema> = {};
      for (const p of parameters) if (p.in === 'path') pathSchemas[String(p.name)] = p.schema ?? {};
      const query = parameters
        .filter((p) => p.in === 'query')
        .map((p) => ({ name: String(p.name), required: Boolean(p.required), schema: p.schema ?? {} }));
      let body: Operation['body'] = null;
      const content = op.requestBody?.content as Record<string, { schema?: JsonSchema }> | undefined;
      if (content) {
        const contentType = Object.keys(content)[0];
        body = {
          contentType,
          schema: content[contentType].schema ?? {},
          required: Boolean(op.requestBody.required),
        };
      }
      operations.push({
        method: method.toUpperCase(),
        path,
        key: `${method.toUpperCase()} ${path}`,
        operationId: typeof op.operationId === 'string' ? op.operationId : null,
        callers: callersOf(op),
        pathParams,
        pathSchemas,
        query,
        body,
        errorStyle: errorStyleOf(op),
      });
    }
  }
  return operations;
}

/** A route whose declared 4xx answer requires `error` speaks RFC 6749 §5.2; every other one RFC 9457. */
function errorStyleOf(op: JsonSchema): 'problem' | 'oauth' {
  for (const [status, response] of Object.entries((op.responses ?? {}) as Record<string, JsonSchema>)) {
    if (!/^4/i.test(status)) continue;
    for (const media of Object.values((response.content ?? {}) as Record<string, JsonSchema>)) {
      const required = (media.schema?.required ?? []) as string[];
      if (required.includes('error')) return 'oauth';
    }
  }
  return 'problem';
}

/** The path with its `{name}` parameters replaced (values are inserted as given: encode them first). */
export function fillPath(path: string, values: Record<string, string>): string {
  return path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`no value for path parameter ${name}`);
    return value;
  });
}
