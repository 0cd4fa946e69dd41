import type { Kysely } from 'kysely';
import type { Clock } from '../../clock.ts';
import { uuidv7 } from '../../ids.ts';
import type { Outbox, OutboxMessage } from '../../outbox.ts';
import type { Database, Storage } from '../../storage/index.ts';
import { keyOf } from './field-value.ts';
import type { Rule, RuleCache, TenantRules } from './rule-cache.ts';
import { changed, evaluate, IDLE, type Observed, type RuleState, type Transition } from './rules.ts';
import * as store from './store.ts';
import { mayMeet, observed, type StoredEvents, type WatchedSession, watchedEvents } from './watched.ts';

export type { StoredEvents } from './watched.ts';

/** A session as a trigger needs it: its player, and whether it is still live. */
export interface SessionLookup {
  sessionIn(
    db: Kysely<Database>,
    tenantId: string,
    sessionId: string,
  ): Promise<{ playerId: string; live: boolean } | null>;
}

/** A session that ended, as its end's transaction knows it. */
export interface EndedSession {
  sessionId: string;
  tenantId: string;
  tenantCohortId: string | null;
  playerId: string;
  endedAt: number;
}

/** One rule's events in one session, as a group brings them. */
interface Work {
  rule: Rule;
  sessionId: string;
  tenantCohortId: string | null;
  events: Observed[];
}

/** Attempts at a state another transaction keeps changing before the group gives up (and is retried). */
const MAX_ATTEMPTS = 5;

/**
 * Evaluates the rules in the ingestion transaction (CONTRACT §13). Costs nothing for a tenant without
 * rules (a cache lookup) or for events of types no rule watches; otherwise one read of the group's
 * state rows, and writes only where a state changes. Every change is a compare-and-set on the state's
 * version, so two processes never both trigger; the webhook messages go to the outbox in the same
 * transaction (at-least-once like every webhook).
 */
export class AlertEvaluator {
  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly cache: RuleCache,
    private readonly outbox: Outbox,
    private readonly sessions: SessionLookup,
  ) {}

  async onStored(trx: Kysely<Database>, group: StoredEvents) {
    const tenants = new Set<string>();
    for (const s of group.sessions.values()) tenants.add(s.tenantId);
    const rules = await this.cache.get(trx, tenants);
    if (rules.size === 0) return;
    const watched = watchedEvents(group, rules);
    // Only sessions with a state under way, or with an event that may meet a condition, are read.
    const sessionIds: string[] = [];
    for (const [sessionId, session] of watched) {
      const tenant = rules.get(session.tenantId) as TenantRules;
      if (tenant.active.has(sessionId) || session.rules.some((rule) => mayMeet(session, rule)))
        sessionIds.push(sessionId);
    }
    if (sessionIds.length === 0) return;
    sessionIds.sort();
    const states = new Map<string, store.StateRow>();
    const chunk = Math.max(1, this.storage.maxBindParameters - 10);
    for (let i = 0; i < sessionIds.length; i += chunk) {
      for (const row of await store.statesOf(trx, sessionIds.slice(i, i + chunk)))
        states.set(`${row.session_id}\u0000${row.alert_id}`, row);
    }
    const messages: OutboxMessage[] = [];
    for (const sessionId of sessionIds) {
      const session = watched.get(sessionId) as WatchedSession;
      for (const rule of session.rules) {
        const state = states.get(`${sessionId}\u0000${rule.alertId}`);
        // The common case: no state, and nothing meets the condition: nothing to write.
        if (!state && !mayMeet(session, rule)) continue;
        const events = observed(session, rule, keyOf(rule.field));
        if (events.length === 0) continue;
        const w = { rule, sessionId, tenantCohortId: session.tenantCohortId, events };
        messages.push(...(await this.advance(trx, w, state, rules.get(session.tenantId) as TenantRules)));
      }
    }
    await this.outbox.enqueue(trx, messages);
  }

  /** One rule in one session: evaluate, write the state where it is still as read, then the incidents. */
  private async advance(
    trx: Kysely<Database>,
    w: Work,
    read: store.StateRow | undefined,
    tenant: TenantRules,
  ) {
    let row = read;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const start: RuleState = row ? stateOf(row) : IDLE;
      const { state, transitions } = evaluate(start, w.rule, w.events, uuidv7);
      if (!changed(start, state)) return [];
      let playerId = start.playerId;
      if (transitions.some((t) => t.kind === 'triggered')) {
        const session = await this.sessions.sessionIn(trx, w.rule.tenantId, w.sessionId);
        // A late event of an ended session triggers nothing: its incidents closed with it.
        if (!session?.live) return [];
        playerId = session.playerId;
      }
      const next = {
        session_id: w.sessionId,
        alert_id: w.rule.alertId,
        tenant_id: w.rule.tenantId,
        pending_since: state.pendingSince,
        incident_id: state.incidentId,
        notified_at: state.notifiedAt,
        player_id: playerId,
      };
      if (await store.compareAndSetState(trx, next, start.version)) {
        // Read with its state from now on (kept until the rules are read again, even once idle).
        if (state.pendingSince !== null || state.incidentId !== null) tenant.active.add(w.sessionId);
        return this.record(trx, w, playerId ?? '', transitions);
      }
      row = await store.stateOf(trx, w.sessionId, w.rule.alertId);
    }
    throw new Error(`the alert state of ${w.rule.alertId} in session ${w.sessionId} kept changing`);
  }

  private async record(trx: Kysely<Database>, w: Work, playerId: string, transitions: Transition[]) {
    const now = this.clock.now();
    const messages: OutboxMessage[] = [];
    for (const t of transitions) {
      if (t.kind === 'triggered') {
        await store.insertIncident(trx, {
          incident_id: t.incidentId,
          alert_id: w.rule.alertId,
          tenant_id: w.rule.tenantId,
          session_id: w.sessionId,
          player_id: playerId,
          tenant_cohort_id: w.tenantCohortId,
          triggered_at: t.event.timestamp,
          triggered_event_id: t.event.id,
          notifications: 1,
          last_notified_at: t.event.timestamp,
          resolved_at: null,
          resolved_reason: null,
          resolved_event_id: null,
          created_at: now,
        });
      } else if (t.kind === 'renotified') {
        await store.noteNotification(trx, t.incidentId, t.event.timestamp);
      } else {
        await store.resolveIncident(trx, t.incidentId, t.event.timestamp, 'condition_cleared', t.event.id);
      }
      const type = t.kind === 'resolved' ? 'alert.resolved' : 'alert.triggered';
      const data = message(w.rule, t.incidentId, w.sessionId, playerId, w.tenantCohortId, t.event.body);
      if (t.kind === 'resolved') Object.assign(data, { reason: 'condition_cleared' });
      messages.push({ tenantId: w.rule.tenantId, type, data, occurredAt: now });
    }
    return messages;
  }

  /**
   * In a session's end's transaction: its open incidents resolve (`alert.resolved`, reason
   * `session_ended`, event null). A tenant without rules costs a cache lookup.
   */
  async onSessionEnded(trx: Kysely<Database>, ended: EndedSession) {
    const rules = (await this.cache.get(trx, [ended.tenantId])).get(ended.tenantId);
    if (!rules) return;
    const open = await store.openStatesOf(trx, ended.sessionId, this.storage.skipLocked);
    const now = this.clock.now();
    const messages: OutboxMessage[] = [];
    for (const row of open) {
      const incidentId = row.incident_id as string;
      await store.compareAndSetState(
        trx,
        { ...row, pending_since: null, incident_id: null, notified_at: null },
        row.version,
      );
      await store.resolveIncident(trx, incidentId, ended.endedAt, 'session_ended', null);
      const rule = rules.byId.get(row.alert_id);
      if (!rule) continue;
      const data = message(rule, incidentId, ended.sessionId, ended.playerId, ended.tenantCohortId, null);
      messages.push({
        tenantId: ended.tenantId,
        type: 'alert.resolved',
        data: { ...data, reason: 'session_ended' },
        occurredAt: now,
      });
    }
    await this.outbox.enqueue(trx, messages);
  }
}

function message(
  rule: Rule,
  incidentId: string,
  sessionId: string,
  playerId: string,
  tenantCohortId: string | null,
  event: Record<string, unknown> | null,
): Record<string, unknown> {
  return { alertId: rule.alertId, name: rule.name, incidentId, sessionId, playerId, tenantCohortId, event };
}

function stateOf(row: store.StateRow): RuleState {
  return {
    pendingSince: row.pending_since === null ? null : Number(row.pending_since),
    incidentId: row.incident_id,
    notifiedAt: row.notified_at === null ? null : Number(row.notified_at),
    playerId: row.player_id,
    version: row.version,
  };
}
