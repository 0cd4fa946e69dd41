/**
 * The authorization matrix's world: who calls, what each caller is expected to get, and the real
 * resources a route's path parameters point at. Each route gets a fresh tenant A (its resources,
 * players and clients), so a route that deletes, ends or revokes something cannot spoil another's
 * check; tenant B and the expired tokens are shared.
 */
import { randomUUID } from 'node:crypto';
import { SCOPES } from '../../src/modules/auth/index.ts';
import { accessToken, call, createTenant, deviceToken } from './api.ts';
import { greyJpeg } from './jpeg.ts';
import type { Callers, Operation } from './openapi.ts';
import { greyPng } from './png.ts';
import { minimalValue } from './schema-arbitrary.ts';

/** Who calls. Tenant A owns the route's resources; its player `OWNER` owns the session. */
export type Caller =
  | 'no token'
  | 'not a token'
  | 'wrong admin token'
  | 'tenant token, bad signature'
  | 'device token, bad signature'
  | 'tenant token, expired'
  | 'device token, expired'
  | 'operator'
  | 'tenant A'
  | 'tenant B'
  | 'tenant A client without the scope'
  | 'own device'
  | "another player's device"
  | "tenant B's device";

export const CALLERS: Caller[] = [
  'no token',
  'not a token',
  'wrong admin token',
  'tenant token, bad signature',
  'device token, bad signature',
  'tenant token, expired',
  'device token, expired',
  'operator',
  'tenant A',
  'tenant B',
  'tenant A client without the scope',
  'own device',
  "another player's device",
  "tenant B's device",
];

/** What a caller must get: a refusal with this status, or through (2xx, or a 409 about state). */
export type Expected = 401 | 403 | 404 | 'allowed';

/** The owner's player id; tenant B's device uses the same id: player ids are per tenant. */
export const OWNER = 'player-1';
export const OTHER_PLAYER = 'player-2';
export const COHORT = 'cohort-a';

/**
 * What a path parameter names and who owns it. `player`: a session of tenant A's player OWNER (so
 * another player gets 404); `tenant`: a resource of tenant A (so tenant B gets 404); `none`: not
 * owned (a page number, a cohort or player id, which every tenant has its own of).
 */
type Ownership = 'player' | 'tenant' | 'none';

interface ParamSpec {
  owner: Ownership;
  value(world: TenantWorld): Promise<string>;
}

/**
 * Every path parameter the document uses. A route with a parameter missing here fails the matrix:
 * add how to create what it names (and who owns it), and the route is covered.
 */
export const PATH_PARAMS: Record<string, ParamSpec> = {
  pageNumber: { owner: 'none', value: async () => '1' },
  tenantId: { owner: 'tenant', value: async (w) => w.tenantId },
  clientId: { owner: 'tenant', value: (w) => w.client() },
  sessionId: { owner: 'player', value: (w) => w.session() },
  SessionId: { owner: 'player', value: (w) => w.session() },
  commandId: { owner: 'tenant', value: (w) => w.command() },
  TenantCohortId: { owner: 'none', value: async () => COHORT },
  playerId: { owner: 'none', value: async () => OWNER },
  campaignId: { owner: 'tenant', value: (w) => w.campaign() },
  challengeId: { owner: 'tenant', value: (w) => w.challenge() },
  webhookId: { owner: 'tenant', value: (w) => w.webhook() },
  deliveryId: { owner: 'tenant', value: (w) => w.delivery() },
  batchId: { owner: 'tenant', value: (w) => w.batch() },
  imageId: { owner: 'tenant', value: (w) => w.screenshot() },
  alertId: { owner: 'tenant', value: (w) => w.alert() },
};

/** Routes that take no token at all (CONTRACT §1, §7, §9). Any other route without one fails the matrix. */
export const PUBLIC_ROUTES = new Set([
  'GET /healthz',
  'GET /readyz',
  'POST /oauth/token',
  'GET /.well-known/jwks.json',
  'POST /campaigns/verifyrewardcode',
]);

/**
 * Checks that a route's callers agree with where it lives (CONTRACT §1): `/admin/v1` is the
 * operator's alone, `/client/v1` the device's alone, every other protected route a tenant's with a
 * scope (some also take a device token). Returns what is wrong, or null.
 */
export function misplaced(op: Operation): string | null {
  const c = op.callers;
  if (!c) return PUBLIC_ROUTES.has(op.key) ? null : 'takes no token but is not a known public route';
  if (op.path.startsWith('/admin/v1/')) {
    return c.operator && !c.device && !c.tenantScopes ? null : 'an /admin/v1 route must be operator-only';
  }
  if (op.path.startsWith('/client/v1/')) {
    return c.device && !c.operator && !c.tenantScopes ? null : 'a /client/v1 route must be device-only';
  }
  if (c.operator) return 'only /admin/v1 routes take the operator token';
  return c.tenantScopes ? null : 'a tenant route must name the scope it needs';
}

/** The ownership of the route's path parameters; throws for a parameter the matrix does not know. */
export function ownershipOf(op: Operation): Ownership[] {
  return op.pathParams.map((name) => {
    const spec = PATH_PARAMS[name];
    if (!spec)
      throw new Error(`path parameter {${name}} is not in PATH_PARAMS (test/helpers/authz-world.ts)`);
    return spec.owner;
  });
}

/** What each caller must get from a protected route. */
export function expectations(op: Operation & { callers: Callers }): Map<Caller, Expected> {
  const owners = ownershipOf(op);
  const tenantOwned = owners.some((o) => o !== 'none');
  const playerOwned = owners.includes('player');
  const { operator, device, tenantScopes } = op.callers;
  const tenant = tenantScopes !== null;
  const e = new Map<Caller, Expected>();
  for (const caller of CALLERS.slice(0, 7)) e.set(caller, 401);
  e.set('operator', operator ? 'allowed' : 403);
  e.set('tenant A', tenant ? 'allowed' : 403);
  e.set('tenant A client without the scope', 403);
  e.set('tenant B', !tenant ? 403 : tenantOwned ? 404 : 'allowed');
  e.set('own device', device ? 'allowed' : 403);
  e.set("another player's device", !device ? 403 : playerOwned ? 404 : 'allowed');
  e.set("tenant B's device", !device ? 403 : tenantOwned ? 404 : 'allowed');
  return e;
}

export interface Shared {
  base: string;
  adminToken: string;
  webhookUrl: string;
  tenantB: { token: string };
  expired: { tenant: string; device: string };
}

/** A real request body: JSON, or a multipart form built anew for every send. */
export type Body = { json: unknown } | { form: () => FormData } | null;

const JPEG = greyJpeg(200, 200);
const IMAGE = JPEG.toString('base64');
const CSV_HEADER = 'Reward Code,Reward Title,Reward Requirement,Reward Image,Reward Rules,Target';

/**
 * Bodies whose rules go beyond their JSON Schema (templates with placeholders, a real JPEG, a
 * reachable webhook URL), by route without the operator's `/admin/v1/tenants/{tenantId}` prefix.
 * Any other route's body is the schema's minimal value. A new route whose minimal body the server
 * refuses fails the matrix ("allowed caller got 400"): add its body here.
 */
const BODIES: Record<string, (shared: Shared) => Body> = {
  'POST /client-tokens': () => ({ json: { playerId: `player-${randomUUID()}` } }),
  'POST /campaigns': () => ({ json: { name: 'Matrix', redemption: displayCode } }),
  'PATCH /campaigns/{campaignId}': () => ({ json: { name: 'Renamed' } }),
  'POST /campaigns/{campaignId}/challenges': () => ({ json: challengeBody(`R-${randomUUID()}`) }),
  'PATCH /campaigns/{campaignId}/challenges/{challengeId}': () => ({ json: { rewardTitle: 'Renamed' } }),
  'POST /campaigns/{campaignId}/challenges/import': () => ({
    form: () => {
      const form = new FormData();
      const csv = `${CSV_HEADER}\r\nR-${randomUUID()},Hat,Stream once,hat.jpg,Stream session count,1\r\n`;
      form.append('template', new Blob([csv], { type: 'text/csv' }), 'challenges.csv');
      form.append('images', new Blob([new Uint8Array(JPEG)], { type: 'image/jpeg' }), 'hat.jpg');
      return form;
    },
  }),
  'POST /client/v1/sessions/{sessionId}/screenshots': () => ({ form: screenshotForm }),
  'POST /sessions/{SessionId}/realtime/commands': () => ({ json: { name: 'text', data: 'hello' } }),
  'POST /cohorts/{TenantCohortId}/realtime/commands': () => ({ json: { name: 'text', data: 'hello' } }),
  'POST /webhooks': (s) => ({ json: { url: s.webhookUrl } }),
  'POST /alerts': () => ({ json: ALERT }),
  'PATCH /webhooks/{webhookId}': () => ({ json: { description: 'renamed' } }),
  'POST /webhooks/{webhookId}/replay': () => ({ json: { since: Date.now() - 60_000 } }),
  'POST /sessions/{SessionId}/Events': () => ({ json: eventsBody() }),
  'POST /client/v1/sessions/{sessionId}/events': () => ({ json: eventsBody() }),
};

const ALERT = { name: 'Low battery', eventType: 'Health', field: 'batteryLevel', op: 'lt', value: 15 };

const displayCode = { method: 'displayCode', instructionsTemplate: 'Show {code} at the desk.' };

function challengeBody(rewardCode: string) {
  return {
    rewardCode,
    rewardTitle: 'Hat',
    rewardRequirement: 'Stream once',
    rewardImage: IMAGE,
    rule: { type: 'sessionCount', target: 1 },
  };
}

/** A screenshot upload: one PNG part `image`. */
function screenshotForm() {
  const form = new FormData();
  form.append('image', new Blob([new Uint8Array(greyPng(16, 9))], { type: 'image/png' }), 'shot.png');
  return form;
}

function eventsBody() {
  return { events: [{ id: randomUUID(), eventType: 'Custom', timestamp: Date.now(), custom01: 'matrix' }] };
}

/** The body the matrix sends to a route (every caller gets the same one). */
export function bodyFor(op: Operation, shared: Shared): Body {
  const key = `${op.method} ${op.path.replace(/^\/admin\/v1\/tenants\/\{tenantId\}(?=\/)/, '')}`;
  const special = BODIES[key];
  if (special) return special(shared);
  if (!op.body) return null;
  return { json: minimalValue(op.body.schema) };
}

async function ok<T = Record<string, unknown>>(
  what: string,
  answer: Promise<{ status: number; body: T; text: string }>,
) {
  const res = await answer;
  if (res.status >= 300) throw new Error(`${what}: ${res.status} ${res.text}`);
  return res.body;
}

/** Tenant A of one route: a fresh tenant with its players, and its resources made when first named. */
export class TenantWorld {
  private readonly made = new Map<string, Promise<string>>();

  private constructor(
    readonly shared: Shared,
    readonly tenantId: string,
    readonly token: string,
    readonly clientSecretOf: { clientId: string; clientSecret: string },
    readonly ownDevice: string,
    readonly otherDevice: string,
  ) {}

  static async create(shared: Shared) {
    const t = await createTenant(shared.base, shared.adminToken, { name: 'Tenant A' });
    const own = await deviceToken(shared.base, t.token, OWNER, COHORT);
    const other = await deviceToken(shared.base, t.token, OTHER_PLAYER, COHORT);
    return new TenantWorld(shared, t.tenantId, t.token, t, own, other);
  }

  /** Each resource is made once per world, the first time a parameter names it. */
  private once(name: string, make: () => Promise<string>) {
    let made = this.made.get(name);
    if (!made) {
      made = make();
      this.made.set(name, made);
    }
    return made;
  }

  private call(method: string, path: string, json?: unknown, token = this.token) {
    return call(this.shared.base, method, path, { token, json });
  }

  session() {
    return this.once('session', async () => {
      const body = await ok('session', this.call('POST', '/client/v1/sessions', {}, this.ownDevice));
      return String(body.sessionId);
    });
  }

  command() {
    return this.once('command', async () => {
      const sessionId = await this.session();
      const body = await ok(
        'command',
        this.call('POST', `/sessions/${sessionId}/realtime/commands`, { name: 'text', data: 'hi' }),
      );
      return String(body.commandId);
    });
  }

  /** A screenshot the owner's device uploaded to its session. */
  screenshot() {
    return this.once('screenshot', async () => {
      const sessionId = await this.session();
      const res = await fetch(`${this.shared.base}/client/v1/sessions/${sessionId}/screenshots`, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.ownDevice}` },
        body: screenshotForm(),
      });
      const body = (await res.json()) as Record<string, unknown>;
      if (res.status !== 201) throw new Error(`screenshot: ${res.status} ${JSON.stringify(body)}`);
      return String(body.imageId);
    });
  }

  /** A cohort-wide command to tenant A's cohort (its one session). */
  batch() {
    return this.once('batch', async () => {
      await this.session();
      const body = await ok(
        'batch',
        this.call('POST', `/cohorts/${COHORT}/realtime/commands`, { name: 'text', data: 'hi' }),
      );
      return String(body.batchId);
    });
  }

  alert() {
    return this.once('alert', async () => {
      const body = await ok('alert', this.call('POST', '/alerts', ALERT));
      return String(body.alertId);
    });
  }

  campaign() {
    return this.once('campaign', async () => {
      const body = await ok(
        'campaign',
        this.call('POST', '/campaigns', { name: 'A', redemption: displayCode }),
      );
      return String(body.campaignId);
    });
  }

  challenge() {
    return this.once('challenge', async () => {
      const campaignId = await this.campaign();
      const body = await ok(
        'challenge',
        this.call('POST', `/campaigns/${campaignId}/challenges`, challengeBody('A-1')),
      );
      return String(body.challengeId);
    });
  }

  webhook() {
    return this.once('webhook', async () => {
      const body = await ok('webhook', this.call('POST', '/webhooks', { url: this.shared.webhookUrl }));
      return String(body.webhookId);
    });
  }

  delivery() {
    return this.once('delivery', async () => {
      const webhookId = await this.webhook();
      const body = await ok('delivery', this.call('POST', `/webhooks/${webhookId}/test`));
      return String(body.deliveryId);
    });
  }

  /** A second client of tenant A (routes that delete or rotate a client get this one, not the caller's). */
  client() {
    return this.once('client', async () => {
      const body = await ok(
        'client',
        call(this.shared.base, 'POST', `/admin/v1/tenants/${this.tenantId}/clients`, {
          token: this.shared.adminToken,
          json: { name: 'spare' },
        }),
      );
      return String(body.clientId);
    });
  }

  /** A token of a client of tenant A that has every scope but the ones the route takes. */
  async tokenWithout(scopes: string[]) {
    const rest = SCOPES.filter((s) => !scopes.includes(s));
    if (rest.length === 0)
      throw new Error(`a client without ${scopes.join(', ')} would have no scope at all`);
    const client = await ok(
      'scoped client',
      call(this.shared.base, 'POST', `/admin/v1/tenants/${this.tenantId}/clients`, {
        token: this.shared.adminToken,
        json: { scopes: rest },
      }),
    );
    return accessToken(this.shared.base, String(client.clientId), String(client.clientSecret));
  }

  /** The route's path, its parameters pointing at tenant A's resources. */
  async pathFor(op: Operation) {
    const values: Record<string, string> = {};
    for (const name of op.pathParams) values[name] = encodeURIComponent(await PATH_PARAMS[name].value(this));
    return op.path.replace(/\{([^}]+)\}/g, (_, name: string) => values[name]);
  }
}

/** `header.payload` of one token with the signature of another: well formed, signed by no one. */
export function withForeignSignature(token: string, donor: string) {
  const [header, payload] = token.split('.');
  return `${header}.${payload}.${donor.split('.')[2]}`;
}
