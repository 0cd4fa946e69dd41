import type { Kysely } from 'kysely';
import type { Database } from '../../storage/index.ts';
import { keyOf } from './field-value.ts';
import type { Op } from './rules.ts';
import { type AlertRow, activeSessionsOf, alertsOf } from './store.ts';

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

/** A rule with where its field's value sits among its event type's watched fields. */
export interface WatchedRule extends Rule {
  slot: number;
}

/** The rules of one event type, and the fields they watch (as `fieldValue` keys, by slot). */
export interface TypeWatch {
  rules: WatchedRule[];
  /** The watched fields, by slot, and their `fieldValue` keys. */
  fields: string[];
  keys: string[];
}

/** One tenant's rules, by the event type they watch (a tenant without rules: an empty map). */
export interface TenantRules {
  byType: Map<string, TypeWatch>;
  byId: Map<string, Rule>;
  /**
   * Its sessions with a state that is not idle (a run under way, an open incident), as read with
   * the rules and added to as this process writes them: ingestion reads no state for the others
   * unless an event may meet a condition. Another process's new states are seen when the entry is
   * read again (at most `ttlMs` later).
   */
  active: Set<string>;
}

const NONE: TenantRules = { byType: new Map(), byId: new Map(), active: new Set() };

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
        rules = { byType: new Map(), byId: new Map(), active: new Set() };
        loaded.set(row.tenant_id, rules);
      }
      const rule = ruleOf(row);
      rules.byId.set(rule.alertId, rule);
      let watch = rules.byType.get(rule.eventType);
      if (!watch) {
        watch = { rules: [], fields: [], keys: [] };
        rules.byType.set(rule.eventType, watch);
      }
      const key = keyOf(rule.field);
      let slot = watch.keys.indexOf(key);
      if (slot < 0) {
        slot = watch.keys.push(key) - 1;
        watch.fields.push(rule.field);
      }
      watch.rules.push({ ...rule, slot });
    }
    const withRules = [...loaded].filter(([, rules]) => rules !== NONE).map(([id]) => id);
    if (withRules.length > 0)
      for (const row of await activeSessionsOf(db, withRules))
        loaded.get(row.tenant_id)?.active.add(row.session_id);
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
