import { CLIENT_EVENT_SCHEMAS, SERVER_EVENT_SCHEMAS } from '@liveline/protocol';
import type { FieldError } from '../../http/problem.ts';

/**
 * The pure core of alert rules (CONTRACT §13): which fields a rule may watch (from the protocol's
 * event schemas), whether a value fits its field and operator, and how one rule's state in one
 * session moves with that session's events. No I/O: table-driven tests beside it.
 */

export const OPS = ['lt', 'lte', 'gt', 'gte', 'eq', 'neq'] as const;
export type Op = (typeof OPS)[number];
const ORDER_OPS: ReadonlySet<string> = new Set(['lt', 'lte', 'gt', 'gte']);

export type FieldKind = { kind: 'number' } | { kind: 'string' } | { kind: 'enum'; values: readonly string[] };

/** Fields every event has: not something a rule watches. */
const COMMON = new Set(['id', 'eventType', 'timestamp', 'sessionId']);

type JsonSchema = { type?: string; enum?: unknown[]; properties?: Record<string, JsonSchema> };

function kindOf(schema: JsonSchema): FieldKind | null {
  if (Array.isArray(schema.enum) && schema.enum.every((v) => typeof v === 'string'))
    return { kind: 'enum', values: schema.enum as string[] };
  if (schema.type === 'number' || schema.type === 'integer') return { kind: 'number' };
  if (schema.type === 'string') return { kind: 'string' };
  return null;
}

/**
 * Every event type a rule may name (client and server-emitted), with its watchable fields. Not
 * `SessionEnd`: a session's end resolves its incidents, so nothing triggers on it.
 */
export const EVENT_FIELDS: ReadonlyMap<string, ReadonlyMap<string, FieldKind>> = new Map(
  Object.entries({ ...CLIENT_EVENT_SCHEMAS, ...SERVER_EVENT_SCHEMAS })
    .filter(([type]) => type !== 'SessionEnd')
    .map(([type, schema]) => {
      const fields = new Map<string, FieldKind>();
      for (const [name, field] of Object.entries((schema as JsonSchema).properties ?? {})) {
        const kind = COMMON.has(name) ? null : kindOf(field);
        if (kind) fields.set(name, kind);
      }
      return [type, fields];
    }),
);

export const ALERT_EVENT_TYPES = [...EVENT_FIELDS.keys()];

/** The condition of a rule. */
export interface Condition {
  eventType: string;
  field: string;
  op: Op;
  value: number | string;
}

/** What is wrong with a condition (paths name the body's members), or an empty list. */
export function conditionErrors(c: Condition): FieldError[] {
  const fields = EVENT_FIELDS.get(c.eventType);
  if (!fields) {
    return [{ path: 'eventType', message: `unknown event type; one of ${ALERT_EVENT_TYPES.join(', ')}` }];
  }
  const kind = fields.get(c.field);
  if (!kind) {
    const allowed = [...fields.keys()].join(', ') || 'none';
    return [
      { path: 'field', message: `${c.eventType} events have no field ${c.field}; allowed: ${allowed}` },
    ];
  }
  if (kind.kind === 'number') {
    if (typeof c.value !== 'number' || !Number.isFinite(c.value))
      return [{ path: 'value', message: `${c.field} is numeric: the value must be a number` }];
    return [];
  }
  if (ORDER_OPS.has(c.op))
    return [{ path: 'op', message: `${c.field} is text: only eq and neq apply to it` }];
  if (typeof c.value !== 'string')
    return [{ path: 'value', message: `${c.field} is text: the value must be a string` }];
  if (kind.kind === 'enum' && !kind.values.includes(c.value))
    return [{ path: 'value', message: `${c.field} is one of ${kind.values.join(', ')}` }];
  return [];
}

/** Whether an event's value of the field meets the condition (a value of another type never does). */
export function meets(op: Op, target: number | string, value: unknown): boolean {
  if (typeof value !== typeof target) return false;
  const v = value as number | string;
  switch (op) {
    case 'lt':
      return v < target;
    case 'lte':
      return v <= target;
    case 'gt':
      return v > target;
    case 'gte':
      return v >= target;
    case 'eq':
      return v === target;
    case 'neq':
      return v !== target;
  }
}

/** One rule's state in one session (a row of `alert_states`; `version` null: no row yet). */
export interface RuleState {
  pendingSince: number | null;
  incidentId: string | null;
  notifiedAt: number | null;
  playerId: string | null;
  version: number | null;
}

export const IDLE: RuleState = {
  pendingSince: null,
  incidentId: null,
  notifiedAt: null,
  playerId: null,
  version: null,
};

/** An event as evaluation sees it: its id, timestamp, the watched field's value, and its JSON. */
export interface Observed {
  id: string;
  timestamp: number;
  value: unknown;
  body: Record<string, unknown>;
}

export type Transition =
  | { kind: 'triggered'; incidentId: string; event: Observed }
  | { kind: 'renotified'; incidentId: string; event: Observed }
  | { kind: 'resolved'; incidentId: string; event: Observed };

export interface RuleTiming {
  forSeconds: number;
  cooldownSeconds: number;
}

/**
 * Moves one rule's state over one session's events (in the order given: arrival, and within one
 * group by timestamp). Only events carrying the field come here. A matching event starts (or
 * continues) a run; the run triggers once it has lasted `forSeconds` (event timestamps, first to
 * latest matching event, no non-matching one between); an open incident notifies again when a
 * matching event comes `cooldownSeconds` (0: never) after the last notification; a non-matching
 * event ends the run and resolves the open incident. `newId` names a new incident.
 */
export function evaluate(
  start: RuleState,
  rule: RuleTiming & { op: Op; value: number | string },
  events: Observed[],
  newId: () => string,
): { state: RuleState; transitions: Transition[] } {
  const state = { ...start };
  const transitions: Transition[] = [];
  for (const event of events) {
    if (meets(rule.op, rule.value, event.value)) {
      state.pendingSince ??= event.timestamp;
      if (state.incidentId === null) {
        if (event.timestamp - state.pendingSince >= rule.forSeconds * 1000) {
          state.incidentId = newId();
          state.notifiedAt = event.timestamp;
          transitions.push({ kind: 'triggered', incidentId: state.incidentId, event });
        }
      } else if (
        rule.cooldownSeconds > 0 &&
        state.notifiedAt !== null &&
        event.timestamp - state.notifiedAt >= rule.cooldownSeconds * 1000
      ) {
        state.notifiedAt = event.timestamp;
        transitions.push({ kind: 'renotified', incidentId: state.incidentId, event });
      }
    } else {
      state.pendingSince = null;
      if (state.incidentId !== null) {
        transitions.push({ kind: 'resolved', incidentId: state.incidentId, event });
        state.incidentId = null;
        state.notifiedAt = null;
      }
    }
  }
  return { state, transitions };
}

/** Whether evaluation changed what the row holds. */
export function changed(a: RuleState, b: RuleState) {
  return a.pendingSince !== b.pendingSince || a.incidentId !== b.incidentId || a.notifiedAt !== b.notifiedAt;
}
