import type { Kysely } from 'kysely';
import type { Static } from 'typebox';
import type { Clock } from '../../clock.ts';
import type { PageRequest } from '../../http/pagination.ts';
import { problems } from '../../http/problem.ts';
import { uuidv7 } from '../../ids.ts';
import { enforceQuota } from '../../limits/quota.ts';
import type { Outbox } from '../../outbox.ts';
import type { Database, Storage } from '../../storage/index.ts';
import { AlertEvaluator, type EndedSession, type SessionLookup, type StoredEvents } from './evaluator.ts';
import { RuleCache } from './rule-cache.ts';
import { type Condition, conditionErrors, type Op } from './rules.ts';
import { type CreateAlertBody, DEFAULT_COOLDOWN_SECONDS, type UpdateAlertBody } from './schemas.ts';
import * as store from './store.ts';
import { alertView, incidentView } from './views.ts';

export interface AlertsOptions {
  /** Rules per tenant (`LIVELINE_QUOTA_ALERT_RULES`); 0: no quota. */
  quota: number;
  /** How long a process trusts its cached rules without hearing of a change. */
  cacheTtlMs: number;
}

type CreateInput = Static<typeof CreateAlertBody>;
type UpdateInput = Static<typeof UpdateAlertBody>;

/**
 * Alert rules (CONTRACT §13): their CRUD and incidents, and the work the wiring puts in other
 * modules' transactions (`onStored`: evaluation at ingestion; `onSessionEnded`; `forgetSession`).
 */
export class AlertsService {
  private readonly cache: RuleCache;
  private readonly evaluator: AlertEvaluator;
  private readonly listeners: ((tenantId: string) => void)[] = [];

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    outbox: Outbox,
    sessions: SessionLookup,
    private readonly options: AlertsOptions,
  ) {
    this.cache = new RuleCache(options.cacheTtlMs);
    this.evaluator = new AlertEvaluator(storage, clock, this.cache, outbox, sessions);
  }

  /** In every ingestion transaction (an `events.onStored` hook). */
  onStored(trx: Kysely<Database>, group: StoredEvents) {
    return this.evaluator.onStored(trx, group);
  }

  /** In every session end's transaction (a `sessions.onEnding` hook): its open incidents resolve. */
  onSessionEnded(trx: Kysely<Database>, ended: EndedSession) {
    return this.evaluator.onSessionEnded(trx, ended);
  }

  /** In a session deletion's transaction (a `sessions.onRemoving` hook). */
  forgetSession(trx: Kysely<Database>, sessionId: string) {
    return store.forgetSession(trx, sessionId);
  }

  /** Erasure (the players module): up to `limit` states and incidents of these sessions; rows deleted. */
  eraseSessions(sessionIds: string[], limit: number): Promise<number> {
    return store.eraseSessions(this.storage.db, sessionIds, limit);
  }

  /** Hears of every rule change made through this process (`wire.ts` tells the others over the bus). */
  onRulesChanged(listener: (tenantId: string) => void) {
    this.listeners.push(listener);
  }

  /** A change made by another process (`null`: anything may have changed, after a bus cut). */
  changedElsewhere(tenantId: string | null) {
    this.cache.invalidate(tenantId);
  }

  private changed(tenantId: string) {
    this.cache.invalidate(tenantId);
    for (const listener of this.listeners) listener(tenantId);
  }

  async create(tenantId: string, input: CreateInput) {
    const condition = checked(input);
    const now = this.clock.now();
    const row: store.AlertRow = {
      alert_id: uuidv7(),
      tenant_id: tenantId,
      name: input.name,
      event_type: condition.eventType,
      field: condition.field,
      op: condition.op,
      value: JSON.stringify(condition.value),
      tenant_cohort_id: input.tenantCohortId ?? null,
      for_seconds: input.forSeconds ?? 0,
      cooldown_seconds: input.cooldownSeconds ?? DEFAULT_COOLDOWN_SECONDS,
      created_at: now,
      updated_at: now,
    };
    const limit = this.options.quota;
    await this.storage.db.transaction().execute(async (trx) => {
      await enforceQuota(this.storage, trx, {
        tenantId,
        limit,
        adding: 1,
        count: (db) => store.countAlerts(db, tenantId),
        refuse: () => problems.quotaExceeded('alert_rule_quota_exceeded', 'alert rules', limit),
      });
      await store.insertAlert(trx, row);
    });
    this.changed(tenantId);
    return alertView(row);
  }

  async list(tenantId: string, page: PageRequest) {
    const { rows, ...meta } = await store.listAlerts(this.storage.db, tenantId, page);
    return { items: rows.map(alertView), ...meta };
  }

  /** Another tenant's rule is as absent as one that never was (404). */
  async find(tenantId: string, alertId: string) {
    const row = await store.findAlert(this.storage.db, tenantId, alertId);
    if (!row) throw problems.notFound('alert');
    return row;
  }

  async get(tenantId: string, alertId: string) {
    return alertView(await this.find(tenantId, alertId));
  }

  async update(tenantId: string, alertId: string, patch: UpdateInput) {
    const row = await this.find(tenantId, alertId);
    const was = alertView(row);
    const condition = checked({
      eventType: patch.eventType ?? was.eventType,
      field: patch.field ?? was.field,
      op: patch.op ?? was.op,
      value: patch.value ?? was.value,
    });
    const next: store.AlertRow = {
      ...row,
      name: patch.name ?? row.name,
      event_type: condition.eventType,
      field: condition.field,
      op: condition.op,
      value: JSON.stringify(condition.value),
      tenant_cohort_id: patch.tenantCohortId === undefined ? row.tenant_cohort_id : patch.tenantCohortId,
      for_seconds: patch.forSeconds ?? row.for_seconds,
      cooldown_seconds: patch.cooldownSeconds ?? row.cooldown_seconds,
      updated_at: this.clock.now(),
    };
    // A different condition starts every session's run anew; open incidents resolve by the new one.
    const runsChange = (
      ['event_type', 'field', 'op', 'value', 'tenant_cohort_id', 'for_seconds'] as const
    ).some((k) => next[k] !== row[k]);
    await this.storage.db.transaction().execute(async (trx) => {
      await store.updateAlert(trx, alertId, next);
      if (runsChange) await store.resetRuns(trx, alertId);
    });
    this.changed(tenantId);
    return alertView(next);
  }

  /** Deletes a rule with its incidents; open ones end without a message. */
  async remove(tenantId: string, alertId: string) {
    await this.find(tenantId, alertId);
    await this.storage.db.transaction().execute((trx) => store.deleteAlert(trx, alertId));
    this.changed(tenantId);
  }

  async incidents(
    tenantId: string,
    alertId: string,
    status: 'open' | 'resolved' | undefined,
    page: PageRequest,
  ) {
    await this.find(tenantId, alertId);
    const open = status === undefined ? undefined : status === 'open';
    const { rows, ...meta } = await store.listIncidents(this.storage.db, alertId, open, page);
    return { items: rows.map(incidentView), ...meta };
  }
}

/** The condition, or a 400 naming what is wrong (nothing is written). */
function checked(input: { eventType: string; field: string; op: string; value: number | string }): Condition {
  const condition = { ...input, op: input.op as Op };
  const errors = conditionErrors(condition);
  if (errors.length > 0) {
    const first = errors[0];
    throw problems.validation(`The alert rule is not valid: ${first.path} ${first.message}.`, errors);
  }
  return condition;
}
