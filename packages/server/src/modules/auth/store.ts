import type { Kysely } from 'kysely';
import type { PageRequest } from '../../http/pagination.ts';
import { offsetOf } from '../../http/pagination.ts';
import { uuidv7 } from '../../ids.ts';
import { digestSecret, generateSecret } from '../../secrets.ts';
import type { Database, Storage } from '../../storage/index.ts';
import type { Scope } from './scopes.ts';

export interface Tenant {
  tenantId: string;
  name: string;
  createdAt: number;
  /** Days its events are kept (null: the server's LIVELINE_EVENT_RETENTION_DAYS; 0: forever). */
  eventRetentionDays: number | null;
}

/** A tenant's retention as the event retention sweep reads it. */
export interface TenantRetention {
  tenantId: string;
  eventRetentionDays: number | null;
}

function toTenant(row: {
  tenant_id: string;
  name: string;
  created_at: number;
  event_retention_days: number | null;
}): Tenant {
  return {
    tenantId: row.tenant_id,
    name: row.name,
    createdAt: row.created_at,
    eventRetentionDays: row.event_retention_days === null ? null : Number(row.event_retention_days),
  };
}

export interface ClientInfo {
  clientId: string;
  tenantId: string;
  name: string | null;
  scopes: Scope[];
  createdAt: number;
  revokedAt: number | null;
  /** Until when the secret a rotation replaced still works; null when it does not. */
  previousSecretExpiresAt: number | null;
}

export async function createTenant(storage: Storage, name: string, now: number): Promise<Tenant> {
  const tenant = { tenantId: uuidv7(), name, createdAt: now, eventRetentionDays: null };
  await storage.db
    .insertInto('tenants')
    .values({ tenant_id: tenant.tenantId, name, created_at: now })
    .execute();
  return tenant;
}

export async function findTenant(storage: Storage, tenantId: string): Promise<Tenant | null> {
  const row = await storage.db
    .selectFrom('tenants')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
  return row ? toTenant(row) : null;
}

/** Sets (or, with null, clears) a tenant's event retention; the tenant as it now is, or null when unknown. */
export async function setTenantRetention(
  storage: Storage,
  tenantId: string,
  eventRetentionDays: number | null,
): Promise<Tenant | null> {
  const result = await storage.db
    .updateTable('tenants')
    .set({ event_retention_days: eventRetentionDays })
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) === 0) return null;
  return findTenant(storage, tenantId);
}

/** Every tenant's event retention, in tenant id order, `limit` at a time after `afterTenantId`. */
export async function tenantRetentions(
  storage: Storage,
  afterTenantId: string | null,
  limit: number,
): Promise<TenantRetention[]> {
  let query = storage.db
    .selectFrom('tenants')
    .select(['tenant_id', 'event_retention_days'])
    .orderBy('tenant_id')
    .limit(limit);
  if (afterTenantId !== null) query = query.where('tenant_id', '>', afterTenantId);
  const rows = await query.execute();
  return rows.map((r) => ({
    tenantId: r.tenant_id,
    eventRetentionDays: r.event_retention_days === null ? null : Number(r.event_retention_days),
  }));
}

export async function listTenants(storage: Storage, page: PageRequest) {
  const [rows, count] = await Promise.all([
    storage.db
      .selectFrom('tenants')
      .selectAll()
      .orderBy('created_at')
      .orderBy('tenant_id')
      .limit(page.pageSize)
      .offset(offsetOf(page))
      .execute(),
    storage.db
      .selectFrom('tenants')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow(),
  ]);
  const tenants: Tenant[] = rows.map(toTenant);
  return { tenants, totalCount: Number(count.n) };
}

function toClientInfo(row: {
  client_id: string;
  tenant_id: string;
  name: string | null;
  scopes: string;
  created_at: number;
  revoked_at: number | null;
  previous_secret_expires_at: number | null;
}): ClientInfo {
  return {
    clientId: row.client_id,
    tenantId: row.tenant_id,
    name: row.name,
    scopes: row.scopes.split(' ').filter(Boolean) as Scope[],
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
    previousSecretExpiresAt: row.previous_secret_expires_at,
  };
}

/** Creates an OAuth2 client. The secret is returned here once and stored only as a keyed digest. */
export async function createClient(
  storage: Storage,
  digestKey: Buffer,
  input: { tenantId: string; name: string | null; scopes: Scope[] },
  now: number,
) {
  const clientId = uuidv7();
  const clientSecret = generateSecret('lls');
  await storage.db
    .insertInto('oauth_clients')
    .values({
      client_id: clientId,
      tenant_id: input.tenantId,
      name: input.name,
      secret_digest: digestSecret(digestKey, clientSecret),
      scopes: input.scopes.join(' '),
      created_at: now,
      revoked_at: null,
      previous_secret_digest: null,
      previous_secret_expires_at: null,
    })
    .execute();
  return {
    clientId,
    clientSecret,
    tenantId: input.tenantId,
    name: input.name,
    scopes: input.scopes,
    createdAt: now,
  };
}

export async function listClients(storage: Storage, tenantId: string, page: PageRequest) {
  const base = storage.db.selectFrom('oauth_clients').where('tenant_id', '=', tenantId);
  const [rows, count] = await Promise.all([
    base
      .selectAll()
      .orderBy('created_at')
      .orderBy('client_id')
      .limit(page.pageSize)
      .offset(offsetOf(page))
      .execute(),
    base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { clients: rows.map(toClientInfo), totalCount: Number(count.n) };
}

/** A client as stored, with the digests of its secrets (never leave the module). */
export interface StoredClient extends ClientInfo {
  secretDigest: string;
  /** The secret a rotation replaced; it works until `previousSecretExpiresAt`. */
  previousSecretDigest: string | null;
}

export async function findClient(storage: Storage, clientId: string): Promise<StoredClient | null> {
  const row = await storage.db
    .selectFrom('oauth_clients')
    .selectAll()
    .where('client_id', '=', clientId)
    .executeTakeFirst();
  return row
    ? {
        ...toClientInfo(row),
        secretDigest: row.secret_digest,
        previousSecretDigest: row.previous_secret_digest,
      }
    : null;
}

/** Revokes a client; true when it existed in that tenant and was live. */
export async function revokeClient(storage: Storage, tenantId: string, clientId: string, now: number) {
  const result = await storage.db
    .updateTable('oauth_clients')
    .set({ revoked_at: now })
    .where('client_id', '=', clientId)
    .where('tenant_id', '=', tenantId)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * Gives a live client of the tenant a new secret, returned here once and stored as a keyed digest.
 * The current secret keeps working until `previousUntil`, or stops at once when that is null. Null
 * when the client is not a live client of that tenant.
 */
export async function rotateClientSecret(
  storage: Storage,
  digestKey: Buffer,
  tenantId: string,
  clientId: string,
  previousUntil: number | null,
) {
  const clientSecret = generateSecret('lls');
  const row = await storage.db
    .updateTable('oauth_clients')
    .set((eb) => ({
      secret_digest: digestSecret(digestKey, clientSecret),
      previous_secret_digest: previousUntil === null ? null : eb.ref('secret_digest'),
      previous_secret_expires_at: previousUntil,
    }))
    .where('client_id', '=', clientId)
    .where('tenant_id', '=', tenantId)
    .where('revoked_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
  return row ? { ...toClientInfo(row), clientSecret } : null;
}

/** Refuses the player's device tokens issued before `notBefore` (a later revocation wins). */
export async function revokePlayerTokens(
  storage: Storage,
  tenantId: string,
  playerId: string,
  notBefore: number,
) {
  await revokePlayerTokensIn(storage.db, tenantId, playerId, notBefore);
}

/** `revokePlayerTokens` through `db` (the caller's transaction). */
export async function revokePlayerTokensIn(
  db: Kysely<Database>,
  tenantId: string,
  playerId: string,
  notBefore: number,
) {
  await db
    .insertInto('player_token_revocations')
    .values({ tenant_id: tenantId, player_id: playerId, not_before: notBefore })
    .onConflict((oc) =>
      oc
        .columns(['tenant_id', 'player_id'])
        .doUpdateSet((eb) => ({ not_before: eb.ref('excluded.not_before') }))
        .where('player_token_revocations.not_before', '<', (eb) => eb.ref('excluded.not_before')),
    )
    .execute();
}
