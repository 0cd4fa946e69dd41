import { fieldsStart, fieldValue } from './field-value.ts';
import type { TenantRules, WatchedRule } from './rule-cache.ts';
import { meets, type Observed } from './rules.ts';

/** A stored event as ingestion hands it over (the events module's `EventRow`, the columns used). */
export interface StoredRow {
  session_id: string;
  event_id: string;
  event_type: string;
  timestamp: number;
  body: string;
  /** The stream the event belongs to (its own, or the one ingestion stamped), when handed over. */
  streaming_session_id?: string | null;
  /** The event's validated own fields, when ingestion hands them over (no need to read `body`). */
  fields?: Readonly<Record<string, unknown>>;
}

/**
 * One field's value of a stored event: from its validated fields when ingestion handed them over
 * (`streamingSessionId`, which ingestion may stamp, from its column), else from its JSON.
 */
function fieldOf(row: StoredRow, field: string, key: string, from: number): unknown {
  if (field === 'streamingSessionId') {
    if (row.streaming_session_id !== undefined) return row.streaming_session_id ?? undefined;
  } else if (row.fields) return row.fields[field];
  return fieldValue(row.body, key, from < 0 ? fieldsStart(row.body) : from);
}

/** What one ingestion transaction stored (the events module's `StoredGroup`, the members used). */
export interface StoredEvents {
  inserted: StoredRow[];
  sessions: Map<string, { tenantId: string; tenantCohortId: string | null }>;
}

/** Distinct string values kept per field before a summary gives up and says "scan". */
const MAX_STRINGS = 32;

/** What one watched field's values were, over a session's events of one type. */
class FieldSummary {
  min = Number.POSITIVE_INFINITY;
  max = Number.NEGATIVE_INFINITY;
  strings: Set<string> | null = new Set();
  /** Some value was neither a number nor a kept string: only a scan can tell. */
  other = false;

  add(value: unknown) {
    if (typeof value === 'number') {
      if (value < this.min) this.min = value;
      if (value > this.max) this.max = value;
    } else if (typeof value === 'string') {
      if (this.strings && this.strings.size < MAX_STRINGS) this.strings.add(value);
      else this.strings = null;
    } else if (value !== undefined && value !== null) this.other = true;
  }

  /** false: no value met the condition; true: one may have (scan to know which). */
  mayMeet(rule: WatchedRule): boolean {
    const target = rule.value;
    if (typeof target === 'number') {
      if (this.min > this.max) return false;
      switch (rule.op) {
        case 'lt':
          return this.min < target;
        case 'lte':
          return this.min <= target;
        case 'gt':
          return this.max > target;
        case 'gte':
          return this.max >= target;
        case 'eq':
          return this.min <= target && target <= this.max;
        case 'neq':
          return this.min !== target || this.max !== target;
      }
    }
    if (this.strings === null || this.other) return true;
    for (const s of this.strings) if (meets(rule.op, target, s)) return true;
    return false;
  }
}

/** A session's watched events, of the types its rules watch, summarised per field. */
export interface WatchedSession {
  tenantId: string;
  tenantCohortId: string | null;
  /** The rules that apply to it (its tenant's, for its cohort) and watch a type it has events of, in id order. */
  rules: WatchedRule[];
  rows: StoredRow[];
  /** Per event type, per watched field (its slot): the values seen. */
  summaries: Map<string, FieldSummary[]>;
}

/**
 * The group's events some rule watches, by session. Only the watched fields are read from each
 * event (`fieldValue`), into per-field summaries (numeric range, a few strings): the common case — a
 * rule without state whose condition no event met — is decided from them without a scan.
 */
export function watchedEvents(group: StoredEvents, rules: Map<string, TenantRules>) {
  const out = new Map<string, WatchedSession>();
  let entry: WatchedSession | undefined;
  let entryOf = '';
  for (const row of group.inserted) {
    const session = group.sessions.get(row.session_id);
    const watch = session && rules.get(session.tenantId)?.byType.get(row.event_type);
    if (!session || !watch) continue;
    // Rows come in session order: the last entry is usually this one.
    if (entryOf !== row.session_id) {
      entryOf = row.session_id;
      entry = out.get(row.session_id);
      if (!entry) {
        entry = {
          tenantId: session.tenantId,
          tenantCohortId: session.tenantCohortId,
          rules: [],
          rows: [],
          summaries: new Map(),
        };
        out.set(row.session_id, entry);
      }
    }
    const e = entry as WatchedSession;
    e.rows.push(row);
    let summaries = e.summaries.get(row.event_type);
    if (!summaries) {
      summaries = watch.keys.map(() => new FieldSummary());
      e.summaries.set(row.event_type, summaries);
    }
    const from = row.fields ? -1 : fieldsStart(row.body);
    for (let slot = 0; slot < watch.keys.length; slot++)
      summaries[slot].add(fieldOf(row, watch.fields[slot], watch.keys[slot], from));
  }
  for (const [sessionId, e] of out) {
    const tenantId = (group.sessions.get(sessionId) as { tenantId: string }).tenantId;
    const byType = (rules.get(tenantId) as TenantRules).byType;
    for (const type of e.summaries.keys())
      for (const rule of byType.get(type)?.rules ?? [])
        if (rule.tenantCohortId === null || rule.tenantCohortId === e.tenantCohortId) e.rules.push(rule);
    // State rows are written in one order (session, then alert) by every transaction.
    e.rules.sort((a, b) => (a.alertId < b.alertId ? -1 : 1));
  }
  return out;
}

/** Whether some event of the session may meet the rule's condition (false: certainly none). */
export function mayMeet(session: WatchedSession, rule: WatchedRule) {
  const summary = session.summaries.get(rule.eventType)?.[rule.slot];
  return summary?.mayMeet(rule) === true;
}

/** One rule's events of a session, as evaluation takes them: carrying the field, in timestamp order. */
export function observed(session: WatchedSession, rule: WatchedRule, key: string): Observed[] {
  const out: Observed[] = [];
  for (const row of session.rows) {
    if (row.event_type !== rule.eventType) continue;
    const value = fieldOf(row, rule.field, key, -1);
    // An event without the field says nothing of the condition.
    if (value === undefined || value === null) continue;
    out.push({
      id: row.event_id,
      timestamp: Number(row.timestamp),
      value,
      get body() {
        return JSON.parse(row.body) as Record<string, unknown>;
      },
    });
  }
  return out.sort((a, b) => a.timestamp - b.timestamp || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
