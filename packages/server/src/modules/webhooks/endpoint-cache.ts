import type { Kysely } from 'kysely';
import type { OutboxType } from '../../outbox.ts';
import type { Database } from '../../storage/index.ts';
import { isOperational } from './operational.ts';
import { enabledEndpointFilters } from './store.ts';

/** What the outbox needs of an endpoint to decide whether a message is for it. */
export interface EndpointFilter {
  webhookId: string;
  /** null: every type. */
  types: ReadonlySet<string> | null;
  /** null: every event type (applies to `session.event`). */
  eventTypes: ReadonlySet<string> | null;
}

/**
 * Whether a message is for the endpoint. No `types` filter means every type except the operational
 * ones, which an endpoint takes only by naming them (opt-in, as Svix does: they are about the
 * tenant's endpoints, not its data, and a receiver written before they existed need not see them).
 */
export function matches(endpoint: EndpointFilter, type: OutboxType | 'webhook.test', eventType?: string) {
  if (endpoint.types === null ? isOperational(type) : !endpoint.types.has(type)) return false;
  if (type === 'session.event' && endpoint.eventTypes !== null) {
    return eventType !== undefined && endpoint.eventTypes.has(eventType);
  }
  return true;
}

const parseSet = (json: string | null) => (json === null ? null : new Set(JSON.parse(json) as string[]));

/** An endpoint's filters as stored (JSON lists, null for none). */
export const endpointFilter = (r: {
  webhook_id: string;
  types: string | null;
  event_types: string | null;
}): EndpointFilter => ({
  webhookId: r.webhook_id,
  types: parseSet(r.types),
  eventTypes: parseSet(r.event_types),
});

/**
 * Each tenant's enabled endpoints, kept in memory so that ingestion for a tenant without webhooks
 * costs one map lookup. Changes made through this process invalidate at once; changes made by
 * another process are seen when the entry expires (`ttlMs`).
 */
export class EndpointCache {
  private readonly entries = new Map<string, { endpoints: EndpointFilter[]; expiresAt: number }>();
  /** Bumped by every invalidation: a load that began before one must not store what it read. */
  private version = 0;

  constructor(private readonly ttlMs: number) {}

  /** The tenant's endpoints if the cache holds a fresh entry; undefined otherwise. */
  peek(tenantId: string): EndpointFilter[] | undefined {
    const entry = this.entries.get(tenantId);
    if (!entry) return undefined;
    if (entry.expiresAt <= performance.now()) {
      this.entries.delete(tenantId);
      return undefined;
    }
    return entry.endpoints;
  }

  /**
   * Loads the tenants that have no fresh entry, through `db` (the caller's transaction: on SQLite
   * the one connection is held by it). Returns every asked tenant's endpoints.
   */
  async get(db: Kysely<Database>, tenantIds: Iterable<string>): Promise<Map<string, EndpointFilter[]>> {
    const out = new Map<string, EndpointFilter[]>();
    const missing: string[] = [];
    for (const id of tenantIds) {
      const hit = this.peek(id);
      if (hit) out.set(id, hit);
      else missing.push(id);
    }
    if (missing.length === 0) return out;
    const version = this.version;
    const rows = await enabledEndpointFilters(db, missing);
    const loaded = new Map<string, EndpointFilter[]>(missing.map((id) => [id, []]));
    for (const r of rows) {
      loaded.get(r.tenant_id)?.push(endpointFilter(r));
    }
    const expiresAt = performance.now() + this.ttlMs;
    for (const [id, endpoints] of loaded) {
      out.set(id, endpoints);
      if (version === this.version && this.ttlMs > 0) this.entries.set(id, { endpoints, expiresAt });
    }
    return out;
  }

  /** Forgets one tenant's entry, or every entry (`null`: anything may have changed). */
  invalidate(tenantId: string | null) {
    this.version++;
    if (tenantId === null) this.entries.clear();
    else this.entries.delete(tenantId);
  }
}
