import type { Kysely } from 'kysely';
import type { Database } from '../../storage/index.ts';
import type { Op } from './rules.ts';
import { type AlertRow, alertsOf } from './store.ts';

/** A rule as evaluation uses it. */
export interface Rule {
  alertId: string;
  tenantId: string;
  name: string;
  eventType: string;
  field: string;
  op: Op;
  value: number | string;
  tenantCohortId: string | null;
  forSeconds: number;
  cooldownSeconds: number;
}

export function ruleOf(row: AlertRow): Rule {
  return {
    alertId: row.alert_id,
    tenantId: row.tenant_id,
    name: row.name,
    eventType: row.event_type,
    field: row.field,
    op: row.op as Op,
    value: JSON.parse(row.value) as number | string,
    tenantCohortId: row.tenant_cohort_id,
    forSeconds: row.for_seconds,
    cooldownSeconds: row.cooldown_seconds,
  };
}

/** One tenant's rules, by the event type they watch (a tenant without rules: an empty map). */
export interface TenantRules {
  byType: Map<string, Rule[]>;
  byId: Map<string, Rule>;
}

const NONE: TenantRules = { byType: new Map(), byId: new Map() };

/**
 * Each tenant's rules in memory, so that ingestion for a tenant without rules, or of event types no
 * rule watches, costs a map lookup. Like the webhook endpoint cache: changes made through this
 * process invalidate at once, other processes hear of them over the bus (`alerts.changed`), and an
 * entry expires after `ttlMs`, which bounds how long a lost bus message can leave a process behind.
 */
export class RuleCache {
  private readonly entries = new Map<string, { rules: TenantRules; expiresAt: number }>();
  /** Bumped by every invalidation: a load that began before one must not store what it read. */
  private version = 0;

  constructor(private readonly ttlMs: number) {}

  private peek(tenantId: string): TenantRules | undefined {
    const entry = this.entries.get(tenantId);
    if (!entry) return undefined;
    if (entry.expiresAt <= performance.now()) {
      this.entries.delete(tenantId);
      return undefined;
    }
    return entry.rules;
  }

  /** The tenants' rules (only tenants that have some), loading the missing ones through `db`. */
  async get(db: Kysely<Database>, tenantIds: Iterable<string>): Promise<Map<string, TenantRules>> {
    const out = new Map<string, TenantRules>();
    const missing: string[] = [];
    for (const id of tenantIds) {
      const hit = this.peek(id);
      if (hit === undefined) missing.push(id);
      else if (hit.byId.size > 0) out.set(id, hit);
    }
    if (missing.length === 0) return out;
    const version = this.version;
    const loaded = new Map<string, TenantRules>(missing.map((id) => [id, NONE]));
    for (const row of await alertsOf(db, missing)) {
      let rules = loaded.get(row.tenant_id);
      if (!rules || rules === NONE) {
        rules = { byType: new Map(), byId: new Map() };
        loaded.set(row.tenant_id, rules);
      }
      const rule = ruleOf(row);
      rules.byId.set(rule.alertId, rule);
      const list = rules.byType.get(rule.eventType);
      if (list) list.push(rule);
      else rules.byType.set(rule.eventType, [rule]);
    }
    const expiresAt = performance.now() + this.ttlMs;
    for (const [id, rules] of loaded) {
      if (rules.byId.size > 0) out.set(id, rules);
      if (version === this.version && this.ttlMs > 0) this.entries.set(id, { rules, expiresAt });
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
