/**
 * The schema-driven fuzz pass (issue 10): for every operation of `/openapi.json`, requests built by
 * fast-check from the operation's own schemas — valid values, the same with one hostile change (a
 * wrong type, a huge or strange string, a null, deep nesting, an extra or missing field), hostile
 * path segments, query strings, content types, raw bodies and auth headers — sent to a real server
 * with the token the route takes and pointing at real resources. Every answer is judged: no 5xx, every
 * error a problem document (RFC 6749 errors on `/oauth/token`), no stack trace, file path or SQL in any
 * body. Used by `test/integration/fuzz.test.ts` (a few thousand requests) and `bench/fuzz.ts` (the long run).
 *
 * Safety: the server may only ever reach this machine. Webhook URLs the fuzz registers are rewritten to
 * 127.0.0.1 (see `keepLocal`), so no request makes the server resolve or connect to another host.
 */
import fs from 'node:fs';
import fc from 'fast-check';
import { type Dispatcher, request } from 'undici';
import { call, createTenant, deviceToken } from './api.ts';
import { greyJpeg } from './jpeg.ts';
import type { JsonSchema, Operation } from './openapi.ts';
import { greyPng } from './png.ts';
import {
  applyMutation,
  hostileString,
  hostileValue,
  mutation,
  NASTY_STRINGS,
  toJsonText,
  validArbitrary,
} from './schema-arbitrary.ts';

export const OWNER = 'fuzz-player-1';
export const COHORT = 'fuzz-cohort';
const JPEG = greyJpeg(200, 200);

/** One request as sent: everything a failure report needs to replay it. */
export interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string | Buffer | null;
  /** How the request was built (`valid body`, `mutated body`, `raw text`...), for reports. */
  shape: string;
}

export interface Answer {
  status: number;
  contentType: string;
  text: string;
  ms: number;
}

export interface Finding {
  operation: string;
  request: string;
  answer: string;
  problems: string[];
  seed?: number;
}

// --- the world the requests point at ----------------------------------------------------------------

/**
 * A tenant with a live session, a command, a campaign with a challenge, a webhook endpoint with a
 * delivery and a spare client, so path parameters can name things that exist. `ensure()` makes
 * again whatever a fuzzed request ended, deleted or revoked.
 */
export class FuzzWorld {
  ids: Record<string, string> = {};
  tenantToken = '';
  device = '';

  private constructor(
    readonly base: string,
    readonly adminToken: string,
    readonly webhookUrl: string,
    readonly tenantId: string,
    private clientId: string,
    private clientSecret: string,
  ) {}

  static async create(base: string, adminToken: string, webhookUrl: string) {
    const t = await createTenant(base, adminToken, { name: 'Fuzz tenant' });
    const world = new FuzzWorld(base, adminToken, webhookUrl, t.tenantId, t.clientId, t.clientSecret);
    world.tenantToken = t.token;
    world.ids.tenantId = t.tenantId;
    await world.ensure();
    return world;
  }

  private async tenant(method: string, path: string, json?: unknown) {
    return call(this.base, method, path, { token: this.tenantToken, json });
  }

  private async made(
    what: string,
    answer: Promise<{ status: number; body: Record<string, unknown>; text: string }>,
  ) {
    const res = await answer;
    if (res.status >= 300) throw new Error(`fuzz world: ${what} failed: ${res.status} ${res.text}`);
    return res.body;
  }

  /**
   * Brings back whatever the last requests took away (each check is one cheap request). Some of it
   * goes in the background: after a fuzzed erasure of the player, its job also erases the sessions
   * started within the erasure's second (players/service.ts), so a session this makes right after
   * one can vanish between its check and the command made on it (404 "No such session"). A step that
   * fails starts the checks over from the next whole second, a few times, before the world gives up.
   */
  async ensure() {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.ensureOnce();
        return;
      } catch (err) {
        if (attempt >= 3) throw err;
        await new Promise((resolve) => setTimeout(resolve, 1050 - (Date.now() % 1000)));
      }
    }
  }

  private async ensureOnce() {
    const { base } = this;
    if ((await this.tenant('GET', '/sessions/active')).status === 401) {
      const fresh = await createTenantClient(base, this.adminToken, this.tenantId);
      Object.assign(this, {
        clientId: fresh.clientId,
        clientSecret: fresh.clientSecret,
        tenantToken: fresh.token,
      });
    }
    if (
      !this.device ||
      (await call(base, 'GET', '/client/v1/challenges', { token: this.device })).status === 401
    )
      this.device = await deviceToken(base, this.tenantToken, OWNER, COHORT);
    const session = this.ids.sessionId ? await this.tenant('GET', `/sessions/${this.ids.sessionId}`) : null;
    if (session?.status !== 200 || session.body.status !== 'live') {
      const body = await this.made(
        'session',
        call(base, 'POST', '/client/v1/sessions', { token: this.device, json: {} }),
      );
      this.ids.sessionId = String(body.sessionId);
      delete this.ids.commandId;
    }
    if (!this.ids.commandId || (await this.tenant('GET', this.commandPath())).status !== 200) {
      const body = await this.made(
        'command',
        this.tenant('POST', `/sessions/${this.ids.sessionId}/realtime/commands`, {
          name: 'text',
          data: 'hi',
        }),
      );
      this.ids.commandId = String(body.commandId);
    }
    const imagePath = () => `/sessions/${this.ids.sessionId}/screenshots/${this.ids.imageId}`;
    if (!this.ids.imageId || (await this.tenant('GET', imagePath())).status !== 200) {
      const form = new FormData();
      form.append('image', new Blob([new Uint8Array(greyPng(16, 9))], { type: 'image/png' }), 'shot.png');
      const res = await fetch(`${base}/client/v1/sessions/${this.ids.sessionId}/screenshots`, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.device}` },
        body: form,
      });
      const body = (await res.json()) as Record<string, unknown>;
      if (res.status !== 201)
        throw new Error(`fuzz world: screenshot failed: ${res.status} ${JSON.stringify(body)}`);
      this.ids.imageId = String(body.imageId);
    }
    if (
      !this.ids.campaignId ||
      (await this.tenant('GET', `/campaigns/${this.ids.campaignId}`)).status !== 200
    ) {
      const body = await this.made(
        'campaign',
        this.tenant('POST', '/campaigns', {
          name: 'Fuzz',
          redemption: { method: 'displayCode', instructionsTemplate: 'Show {code}.' },
        }),
      );
      this.ids.campaignId = String(body.campaignId);
      delete this.ids.challengeId;
    }
    const challengePath = () => `/campaigns/${this.ids.campaignId}/challenges/${this.ids.challengeId}`;
    if (!this.ids.challengeId || (await this.tenant('GET', challengePath())).status !== 200) {
      const body = await this.made(
        'challenge',
        this.tenant('POST', `/campaigns/${this.ids.campaignId}/challenges`, {
          rewardCode: `F-${Date.now()}-${Math.random()}`,
          rewardTitle: 'Hat',
          rewardRequirement: 'Stream once',
          rewardImage: JPEG.toString('base64'),
          rule: { type: 'sessionCount', target: 1 },
        }),
      );
      this.ids.challengeId = String(body.challengeId);
    }
    if (!this.ids.webhookId || (await this.tenant('GET', `/webhooks/${this.ids.webhookId}`)).status !== 200) {
      const body = await this.made('webhook', this.tenant('POST', '/webhooks', { url: this.webhookUrl }));
      this.ids.webhookId = String(body.webhookId);
      delete this.ids.deliveryId;
    }
    const deliveryPath = () => `/webhooks/${this.ids.webhookId}/deliveries/${this.ids.deliveryId}`;
    if (!this.ids.deliveryId || (await this.tenant('GET', deliveryPath())).status !== 200) {
      const body = await this.made('delivery', this.tenant('POST', `/webhooks/${this.ids.webhookId}/test`));
      this.ids.deliveryId = String(body.deliveryId);
    }
    // A spare client for the routes that delete or rotate one: never the one the fuzz calls with.
    const clients = await call(base, 'GET', `/admin/v1/tenants/${this.tenantId}/clients`, {
      token: this.adminToken,
    });
    if (!this.ids.clientId || !clients.text.includes(this.ids.clientId)) {
      const spare = await createTenantClient(base, this.adminToken, this.tenantId);
      this.ids.clientId = spare.clientId;
    }
  }

  private commandPath() {
    return `/sessions/${this.ids.sessionId}/realtime/commands/${this.ids.commandId}`;
  }

  /** The real value for a path parameter, by the name the document gives it. */
  realValue(name: string): string | null {
    switch (name) {
      case 'SessionId':
        return this.ids.sessionId;
      case 'pageNumber':
        return '1';
      case 'TenantCohortId':
        return COHORT;
      case 'playerId':
        return OWNER;
      default:
        return this.ids[name] ?? null;
    }
  }

  /** The token an operation takes; the fuzz calls each route as someone it admits. */
  tokenFor(op: Operation): string | null {
    const c = op.callers;
    if (!c) return null;
    if (c.operator) return this.adminToken;
    if (c.tenantScopes) return this.tenantToken;
    return this.device;
  }

  /** HTTP Basic credentials of the tenant's client, for `/oauth/token`. */
  basic() {
    return `Basic ${Buffer.from(`${this.clientId}:${this.clientSecret}`).toString('base64')}`;
  }
}

async function createTenantClient(base: string, adminToken: string, tenantId: string) {
  const res = await call(base, 'POST', `/admin/v1/tenants/${tenantId}/clients`, {
    token: adminToken,
    json: {},
  });
  if (res.status !== 201) throw new Error(`fuzz world: client failed: ${res.status} ${res.text}`);
  const clientId = String(res.body.clientId);
  const clientSecret = String(res.body.clientSecret);
  const form = new URLSearchParams({ grant_type: 'client_credentials' });
  const token = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`,
    },
    body: form.toString(),
  }).then((r) => r.json() as Promise<{ access_token: string }>);
  return { clientId, clientSecret, token: token.access_token };
}

// --- keeping the server on this machine -------------------------------------------------------------

const LOCAL_HOSTS = new Set(['127.0.0.1', '[::1]']);

/**
 * Every string that parses as an http(s) URL (as the server parses webhook URLs: WHATWG) and names a
 * host other than the loopback address is pointed at `local` instead. The fuzz never makes the
 * server resolve a name or open a connection beyond this machine.
 */
export function keepLocal(value: unknown, local: string): unknown {
  if (typeof value === 'string') {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      return value;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return value;
    return LOCAL_HOSTS.has(url.hostname) ? value : local;
  }
  if (Array.isArray(value)) return value.map((v) => keepLocal(v, local));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      Object.defineProperty(out, k, {
        value: keepLocal(v, local),
        enumerable: true,
        configurable: true,
        writable: true,
      });
    }
    for (const s of Object.getOwnPropertySymbols(value))
      (out as Record<symbol, unknown>)[s] = (value as Record<symbol, unknown>)[s];
    return out;
  }
  return value;
}

// --- request arbitraries ----------------------------------------------------------------------------

/** Printable ASCII only: what fetch lets through in a header value. */
const headerText = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 80, unit: 'grapheme-ascii' }) },
  { weight: 1, arbitrary: fc.integer({ min: 200, max: 20_000 }).map((n) => 'A'.repeat(n)) },
);

/**
 * `encodeURIComponent`, except that a lone surrogate (which it refuses) is written as the bytes a
 * careless encoder would produce: UTF-8 that is not valid (`%ED%A0%80`). Servers get such URLs too.
 */
export function encodeAny(text: string): string {
  let out = '';
  for (const ch of text) {
    const unit = ch.charCodeAt(0);
    if (ch.length === 1 && unit >= 0xd800 && unit <= 0xdfff) {
      const bytes = [0xed, 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)];
      out += bytes.map((b) => `%${b.toString(16).toUpperCase()}`).join('');
    } else out += encodeURIComponent(ch);
  }
  return out;
}

const hostileSegment = fc.oneof(
  { weight: 4, arbitrary: hostileString.map((s) => encodeAny(s.slice(0, 3000))) },
  { weight: 1, arbitrary: fc.integer({ min: 3_000, max: 30_000 }).map((n) => 'a'.repeat(n)) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '0',
      '-1',
      '1.5',
      '1e300',
      '99999999999999999999',
      '%',
      '%zz',
      '%00',
      '%2e%2e',
      '..',
      '%2F',
      '%C0%AE',
      '%ED%A0%80',
      '00000000-0000-0000-0000-000000000000',
      'ffffffff-ffff-ffff-ffff-ffffffffffff',
    ),
  },
  { weight: 1, arbitrary: fc.uuid().map(String) },
);

/** Numbers as text that trouble a parser: out of range, not integers, not finite once parsed. */
const numericText = fc.oneof(
  fc.constantFrom(
    '0',
    '-1',
    '-0',
    '1.5',
    '1e300',
    '1e-300',
    '99999999999999999999',
    '2147483648',
    '9007199254740993',
    '0x10',
    '1_000',
    ' 1',
    'Infinity',
    'NaN',
  ),
  fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
);

function isNumeric(schema: JsonSchema | undefined) {
  const type = schema?.type;
  return (
    type === 'integer' ||
    type === 'number' ||
    (Array.isArray(type) && type.some((t) => t === 'integer' || t === 'number'))
  );
}

/** A path segment for a parameter: mostly the real resource, else other valid values or hostile text. */
function segmentArbitrary(real: string | null, schema: JsonSchema | undefined): fc.Arbitrary<string> {
  const choices: fc.WeightedArbitrary<string>[] = [{ weight: 1, arbitrary: hostileSegment }];
  if (real) choices.push({ weight: 5, arbitrary: fc.constant(encodeAny(real)) });
  if (schema)
    choices.push({
      weight: 1,
      arbitrary: validArbitrary(schema).map((v) => encodeAny(scalarText(v))),
    });
  if (isNumeric(schema)) choices.push({ weight: 2, arbitrary: numericText.map(encodeAny) });
  return fc.oneof(...choices);
}

function scalarText(value: unknown) {
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
}

function queryArbitrary(op: Operation): fc.Arbitrary<string> {
  const params = op.query.map((p) =>
    fc
      .option(
        fc.oneof(
          { weight: 3, arbitrary: validArbitrary(p.schema).map(scalarText) },
          { weight: 2, arbitrary: hostileString.map((s) => s.slice(0, 2000)) },
          // Numeric parameters get numbers a parser chokes on (a non-numeric one: more hostile text).
          {
            weight: 2,
            arbitrary: isNumeric(p.schema) ? numericText : hostileString.map((s) => s.slice(0, 200)),
          },
        ),
        { nil: undefined, freq: 2 },
      )
      .map((v) => (v === undefined ? [] : [`${encodeAny(p.name)}=${encodeAny(v)}`])),
  );
  const extra = fc.oneof(
    { weight: 6, arbitrary: fc.constant([] as string[]) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.string({ maxLength: 10 }), fc.string({ maxLength: 10 }))
        .map(([k, v]) => [`${encodeAny(k)}=${encodeAny(v)}`]),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        ['%zz=1'],
        ['a=%'],
        ['=&&='],
        ['pageSize=1&pageSize=2'],
        ['limit=1e999'],
        ['after=%00'],
      ),
    },
    {
      weight: 1,
      arbitrary: fc.constant(op.query.length > 0 ? [`${op.query[0].name}=1`, `${op.query[0].name}=2`] : []),
    },
  );
  return fc.tuple(fc.tuple(...params), extra).map(([parts, more]) => {
    const all = [...parts.flat(), ...more];
    return all.length ? `?${all.join('&')}` : '';
  });
}

const RAW_BODIES = [
  '{',
  '{"a":',
  '[',
  'null',
  '[]',
  '"text"',
  '42',
  '1e999',
  '\ufeff{}',
  '{"__proto__":{"polluted":true}}',
  '{"constructor":{"prototype":{"polluted":true}}}',
  '{"a":1,"a":2}',
  '{"events":[{"id":"1","eventType":"Custom","timestamp":1e400}]}',
  `{"x":"${'\\ud800'}"}`,
  '\u0000',
  '<xml/>',
];

const CONTENT_TYPES = [
  'text/plain',
  'application/xml',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'application/octet-stream',
  'application/vnd.api+json',
  'image/jpeg',
];

interface BodyPart {
  contentType: string | null;
  body: string | Buffer | null;
  shape: string;
}

function jsonBody(value: unknown, shape: string, local: string): BodyPart {
  return { contentType: 'application/json', body: toJsonText(keepLocal(value, local)), shape };
}

function multipartBody(
  parts: { name: string; filename?: string; type?: string; data: string | Buffer }[],
): BodyPart {
  const boundary = 'fuzzboundary7MA4YWxkTrZu0gW';
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`;
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n`));
    if (p.type) chunks.push(Buffer.from(`Content-Type: ${p.type}\r\n`));
    chunks.push(Buffer.from('\r\n'), Buffer.from(p.data), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return {
    contentType: `multipart/form-data; boundary=${boundary}`,
    body: Buffer.concat(chunks),
    shape: 'multipart',
  };
}

const CSV_HEADER = 'Reward Code,Reward Title,Reward Requirement,Reward Image,Reward Rules,Target';
const csvCell = fc.oneof(
  fc.constantFrom(
    'R1',
    'Hat',
    'hat.jpg',
    'Total mins streamed',
    'Stream session count',
    '1',
    '0',
    '-5',
    '"a,b"',
    '=1+1',
    '',
  ),
  hostileString.map((s) => s.slice(0, 500)),
);
const multipartArbitrary = fc
  .record({
    header: fc.oneof(
      { weight: 4, arbitrary: fc.constant(CSV_HEADER) },
      { weight: 1, arbitrary: hostileString.map((s) => s.slice(0, 500)) },
    ),
    rows: fc.array(fc.array(csvCell, { minLength: 0, maxLength: 8 }), { maxLength: 4 }),
    image: fc.oneof(
      fc.constant(JPEG),
      fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
      fc.constant(greyJpeg(20, 20)),
    ),
    imageName: fc.constantFrom('hat.jpg', '', '../x.jpg', 'a"b.jpg'),
    extraField: fc.option(
      fc.tuple(
        fc.string({ maxLength: 10 }),
        hostileString.map((s) => s.slice(0, 200)),
      ),
    ),
  })
  .map(({ header, rows, image, imageName, extraField }) => {
    const csv = [header, ...rows.map((r) => r.join(','))].join('\r\n');
    const parts: { name: string; filename?: string; type?: string; data: string | Buffer }[] = [
      { name: 'template', filename: 'challenges.csv', type: 'text/csv', data: csv },
      { name: 'images', filename: imageName, type: 'image/jpeg', data: image },
    ];
    if (extraField) parts.push({ name: extraField[0], data: extraField[1] });
    return multipartBody(parts);
  });

function bodyArbitrary(op: Operation, local: string): fc.Arbitrary<BodyPart> {
  const none = fc.constant<BodyPart>({ contentType: null, body: null, shape: 'no body' });
  const raw = fc.oneof(
    fc.constantFrom(...RAW_BODIES),
    hostileString.map((s) => s.slice(0, 5000)),
  );
  const rawJson = raw.map(
    (text): BodyPart => ({ contentType: 'application/json', body: text, shape: 'raw text as JSON' }),
  );
  const wrongType = fc
    .tuple(fc.constantFrom(...CONTENT_TYPES), raw)
    .map(([contentType, text]): BodyPart => ({ contentType, body: text, shape: `raw ${contentType}` }));
  const anyJson = hostileValue.map((v) => jsonBody(v, 'hostile JSON', local));
  if (!op.body) {
    const choices: fc.WeightedArbitrary<BodyPart>[] = [
      { weight: 6, arbitrary: none },
      { weight: 1, arbitrary: anyJson },
      { weight: 1, arbitrary: wrongType },
    ];
    // Multipart routes (the challenge import) do not describe their body in the document.
    if (op.method === 'POST') choices.push({ weight: 6, arbitrary: multipartArbitrary });
    return fc.oneof(...choices);
  }
  if (op.body.contentType === 'application/x-www-form-urlencoded') {
    const form = fc
      .tuple(validArbitrary(op.body.schema), fc.option(mutation, { freq: 2 }))
      .map(([v, m]) => (m ? applyMutation(v, m) : v))
      .map((v): BodyPart => {
        const params = new URLSearchParams();
        if (v && typeof v === 'object')
          for (const [k, val] of Object.entries(v))
            params.append(k, typeof val === 'string' ? val : (JSON.stringify(val) ?? ''));
        return { contentType: 'application/x-www-form-urlencoded', body: params.toString(), shape: 'form' };
      });
    return fc.oneof(
      { weight: 6, arbitrary: form },
      { weight: 1, arbitrary: rawJson },
      { weight: 1, arbitrary: wrongType },
      { weight: 1, arbitrary: none },
    );
  }
  const valid = validArbitrary(op.body.schema);
  return fc.oneof(
    { weight: 4, arbitrary: valid.map((v) => jsonBody(v, 'valid body', local)) },
    {
      weight: 6,
      arbitrary: fc
        .tuple(valid, mutation)
        .map(([v, m]) => jsonBody(applyMutation(v, m), `mutated body (${m.kind})`, local)),
    },
    { weight: 1, arbitrary: anyJson },
    { weight: 1, arbitrary: rawJson },
    { weight: 1, arbitrary: wrongType },
    { weight: 1, arbitrary: none },
  );
}

function authArbitrary(op: Operation, world: FuzzWorld): fc.Arbitrary<string | null> {
  const token = world.tokenFor(op);
  const right = op.path === '/oauth/token' ? world.basic() : token ? `Bearer ${token}` : null;
  const hostile = fc.oneof(
    fc.constantFrom(
      'Bearer',
      'Bearer ',
      'Basic',
      'Basic !!!',
      'Basic Og==',
      'bearer a b',
      'Token x',
      'Bearer e30.e30.e30',
    ),
    headerText.map((s) => `Bearer ${s}`),
    headerText.map((s) => `Basic ${Buffer.from(s).toString('base64')}`),
  );
  return fc.oneof({ weight: 12, arbitrary: fc.constant(right) }, { weight: 1, arbitrary: hostile });
}

function extraHeaders(op: Operation): fc.Arbitrary<Record<string, string>> {
  const writes = op.method !== 'GET' && op.method !== 'DELETE';
  return fc
    .record(
      {
        'idempotency-key': writes ? headerText : fc.constant(''),
        'x-request-id': headerText,
        'last-event-id': headerText,
        accept: fc.constantFrom('*/*', 'text/html', 'application/xml', 'application/json;q=0'),
      },
      { requiredKeys: [] },
    )
    .map((h) => Object.fromEntries(Object.entries(h).filter(([, v]) => v !== '')));
}

/** Requests for one operation: its method and path, everything else fuzzed. */
export function requestArbitrary(op: Operation, world: FuzzWorld): fc.Arbitrary<FuzzRequest> {
  const segments = op.pathParams.map((name) => segmentArbitrary(world.realValue(name), op.pathSchemas[name]));
  return fc
    .record({
      segments: fc.tuple(...segments),
      query: queryArbitrary(op),
      body: bodyArbitrary(op, world.webhookUrl),
      auth: authArbitrary(op, world),
      extra: fc.option(extraHeaders(op), { freq: 3 }),
    })
    .map(({ segments: values, query, body, auth, extra }) => {
      let i = 0;
      const path = op.path.replace(/\{[^}]+\}/g, () => values[i++]) + query;
      const headers: Record<string, string> = { ...(extra ?? {}) };
      if (auth) headers.authorization = auth;
      if (body.contentType) headers['content-type'] = body.contentType;
      return { method: op.method, path, headers, body: body.body, shape: body.shape };
    });
}

// --- sending and judging ----------------------------------------------------------------------------

const ANSWER_TIMEOUT_MS = 15_000;

/** Sends with undici's `request`, which (unlike fetch) sends a body with GET too, as some clients do. */
export async function send(base: string, req: FuzzRequest): Promise<Answer> {
  const started = performance.now();
  const res = await request(base + req.path, {
    method: req.method as Dispatcher.HttpMethod,
    headers: req.headers,
    body: req.body ?? undefined,
    signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS),
  });
  const header = res.headers['content-type'];
  const contentType = (Array.isArray(header) ? header[0] : header) ?? '';
  // A live tail (text/event-stream) never ends by itself: its headers are the answer.
  let text = '';
  if (contentType.startsWith('text/event-stream')) res.body.destroy();
  else text = await res.body.text();
  return { status: res.statusCode, contentType, text, ms: performance.now() - started };
}

/** What a server must never show a client (CONTRACT §0): where its code lives, how it fails inside. */
const LEAKS: [string, RegExp][] = [
  ['a stack frame', /\bat (?:async )?[\w$.<>[\] ]*\(?[^\s()]*\.(?:ts|js|mjs|cjs):\d+:\d+/],
  ['a file path', /node_modules|\/work\/|packages\/server\/src|file:\/\//],
  [
    'a JavaScript error',
    /\b(?:TypeError|ReferenceError|RangeError|SyntaxError|Cannot read propert|is not a function|Maximum call stack)/,
  ],
  [
    'a database error',
    /SqliteError|SQLITE_[A-Z]+|PostgresError|syntax error at or near|violates [a-z ]+constraint|duplicate key value|relation "[^"]+" does not exist|no such (?:table|column)|invalid input syntax for|out of range for type|KyselyError/i,
  ],
  ['SQL', /\b(?:select\s[\s\S]{1,200}?\sfrom|insert\s+into|update\s+\S+\s+set|delete\s+from)\s/i],
];

function describeRequest(req: FuzzRequest) {
  const body = req.body === null ? '' : typeof req.body === 'string' ? req.body : req.body.toString('latin1');
  const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}… (${s.length} chars)` : s);
  const headers = Object.entries(req.headers).map(([k, v]) => `${k}: ${cut(v, 80)}`);
  return `${req.method} ${cut(req.path, 300)} [${req.shape}] ${headers.join('; ')} ${cut(body, 400)}`;
}

/** What is wrong with an answer (empty: nothing). */
export function judge(op: Operation, req: FuzzRequest, answer: Answer): string[] {
  const problems: string[] = [];
  if (answer.status >= 500) problems.push(`answered ${answer.status}`);
  if (answer.status >= 400) {
    let body: Record<string, unknown> | null = null;
    try {
      body = JSON.parse(answer.text) as Record<string, unknown>;
    } catch {
      body = null;
    }
    // Refusals made before a request is routed (headers too large, a client too slow) cannot know the
    // route: they are problem documents on /oauth/token too.
    const beforeRouting = answer.status === 408 || answer.status === 431;
    if (op.errorStyle === 'oauth' && answer.status < 500 && !beforeRouting) {
      if (!answer.contentType.startsWith('application/json') || typeof body?.error !== 'string')
        problems.push('an /oauth/token error that is not an RFC 6749 error ({error}, application/json)');
    } else if (!answer.contentType.startsWith('application/problem+json')) {
      problems.push(`an error as ${answer.contentType || 'no content type'}, not application/problem+json`);
    } else if (
      typeof body?.type !== 'string' ||
      typeof body.title !== 'string' ||
      body.status !== answer.status ||
      typeof body.code !== 'string'
    ) {
      problems.push('a problem document without type, title, status (equal to the answer’s) and code');
    }
  }
  const sent = `${req.path}\n${req.body === null ? '' : req.body.toString()}`;
  for (const [what, pattern] of LEAKS) {
    const match = pattern.exec(answer.text);
    // Text the request carried may come back (a name, a rejected value): only the server's own counts.
    if (match && !sent.includes(match[0]))
      problems.push(`${what} in the answer: ${JSON.stringify(match[0])}`);
  }
  return problems;
}

export interface FuzzOptions {
  runsPerOperation: number;
  seed: number;
  /** Time for one operation's runs and the shrinking of a failure. */
  timeLimitMs?: number;
  /** Called after each operation (progress, memory samples). */
  onOperation?: (op: Operation, requests: number) => void | Promise<void>;
}

export interface FuzzResult {
  requests: number;
  findings: Finding[];
  /** By operation, how many answers had each status: shows the requests got past auth and validation. */
  statuses: Record<string, Record<number, number>>;
}

/** Runs the fuzz over `operations`; returns what it found, how many requests it sent and their statuses. */
export async function fuzzOperations(
  base: string,
  operations: Operation[],
  world: FuzzWorld,
  options: FuzzOptions,
): Promise<FuzzResult> {
  let requests = 0;
  const findings: Finding[] = [];
  const statuses: Record<string, Record<number, number>> = {};
  for (const op of operations) {
    let last: Finding | null = null;
    const seen: Record<number, number> = {};
    statuses[op.key] = seen;
    const property = fc.asyncProperty(requestArbitrary(op, world), async (req) => {
      requests++;
      let answer: Answer;
      try {
        answer = await send(base, req);
      } catch (err) {
        answer = { status: 0, contentType: '', text: '', ms: ANSWER_TIMEOUT_MS };
        last = {
          operation: op.key,
          request: describeRequest(req),
          answer: `no answer: ${String(err)}`,
          problems: ['no answer'],
        };
        return false;
      }
      seen[answer.status] = (seen[answer.status] ?? 0) + 1;
      const problems = judge(op, req, answer);
      if (problems.length === 0) return true;
      last = {
        operation: op.key,
        request: describeRequest(req),
        answer: `${answer.status} ${answer.contentType} ${answer.text.slice(0, 500)}`,
        problems,
      };
      return false;
    });
    const details = await fc.check(property, {
      numRuns: options.runsPerOperation,
      seed: options.seed,
      plugins: [fc.interruptAfterTimeLimit(options.timeLimitMs ?? 30_000)],
    });
    if (details.failed && last) findings.push({ ...(last as Finding), seed: options.seed });
    await world.ensure();
    await options.onOperation?.(op, requests);
  }
  return { requests, findings, statuses };
}

/** Resident memory of a process (Linux), in bytes. */
export function rssOf(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+)\s+kB/.exec(status);
  if (!kb) throw new Error(`no VmRSS for ${pid}`);
  return Number(kb[1]) * 1024;
}

export { NASTY_STRINGS };
