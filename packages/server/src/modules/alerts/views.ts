import type { Op } from './rules.ts';
import type { AlertRow, IncidentRow } from './store.ts';

export function alertView(row: AlertRow) {
  return {
    alertId: row.alert_id,
    name: row.name,
    eventType: row.event_type,
    field: row.field,
    op: row.op as Op,
    value: JSON.parse(row.value) as number | string,
    tenantCohortId: row.tenant_cohort_id,
    forSeconds: row.for_seconds,
    cooldownSeconds: row.cooldown_seconds,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

export function incidentView(row: IncidentRow) {
  return {
    incidentId: row.incident_id,
    alertId: row.alert_id,
    sessionId: row.session_id,
    playerId: row.player_id,
    tenantCohortId: row.tenant_cohort_id,
    status: row.resolved_at === null ? ('open' as const) : ('resolved' as const),
    triggeredAt: Number(row.triggered_at),
    triggeredEventId: row.triggered_event_id,
    notifications: row.notifications,
    lastNotifiedAt: Number(row.last_notified_at),
    resolvedAt: row.resolved_at === null ? null : Number(row.resolved_at),
    resolvedReason: row.resolved_reason as 'condition_cleared' | 'session_ended' | null,
    resolvedEventId: row.resolved_event_id,
    createdAt: Number(row.created_at),
  };
}
