import type { Kysely, Selectable } from 'kysely';
import type { PageRequest } from '../../http/pagination.ts';
import { type Database, readPage } from '../../storage/index.ts';
import type { AlertIncidentsTable, AlertStatesTable, AlertsTable } from '../../storage/schema.ts';

/** The alerts module's tables: `alerts`, `alert_states`, `alert_incidents`. Nothing else reads them. */

export type AlertRow = Selectable<AlertsTable>;
export type StateRow = Selectable<AlertStatesTable>;
export type IncidentRow = Selectable<AlertIncidentsTable>;

type Db = Kysely<Database>;

// --- rules ----------------------------------------------------------------------------------------

export async function insertAlert(db: Db, row: AlertRow) {
  await db.insertInto('alerts').values(row).execute();
}

export function findAlert(db: Db, tenantId: string, alertId: string) {
  return db
    .selectFrom('alerts')
    .selectAll()
    .where('alert_id', '=', alertId)
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
}

export async function countAlerts(db: Db, tenantId: string) {
  const row = await db
    .selectFrom('alerts')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('tenant_id', '=', tenantId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export function listAlerts(db: Db, tenantId: string, page: PageRequest) {
  const base = db.selectFrom('alerts').where('tenant_id', '=', tenantId);
  return readPage(
    db,
    base,
    (b) => b.selectAll(),
    { column: 'created_at', direction: 'asc', id: 'alert_id' },
    page,
  );
}

/** Every rule of these tenants (the rule cache's load). */
export function alertsOf(db: Db, tenantIds: string[]) {
  return db.selectFrom('alerts').selectAll().where('tenant_id', 'in', tenantIds).execute();
}

export async function updateAlert(db: Db, alertId: string, changes: Partial<AlertRow>) {
  await db.updateTable('alerts').set(changes).where('alert_id', '=', alertId).execute();
}

/** Deletes a rule with its states and incidents. */
export async function deleteAlert(db: Db, alertId: string) {
  await db.deleteFrom('alert_states').where('alert_id', '=', alertId).execute();
  await db.deleteFrom('alert_incidents').where('alert_id', '=', alertId).execute();
  await db.deleteFrom('alerts').where('alert_id', '=', alertId).execute();
}

/** A changed condition starts every session's run anew (an open incident stays open). */
export async function resetRuns(db: Db, alertId: string) {
  await db
    .updateTable('alert_states')
    .set((eb) => ({ pending_since: null, version: eb('version', '+', 1) }))
    .where('alert_id', '=', alertId)
    .where('pending_since', 'is not', null)
    .execute();
}

// --- states -----------------------------------------------------------------------------------------

/** The sessions of these tenants where a condition holds or an incident is open (`alert_states_active`). */
export function activeSessionsOf(db: Db, tenantIds: string[]) {
  return db
    .selectFrom('alert_states')
    .select(['tenant_id', 'session_id'])
    .where('tenant_id', 'in', tenantIds)
    .where((eb) => eb.or([eb('pending_since', 'is not', null), eb('incident_id', 'is not', null)]))
    .execute();
}

/** Every state row of these sessions. */
export function statesOf(db: Db, sessionIds: string[]) {
  return db.selectFrom('alert_states').selectAll().where('session_id', 'in', sessionIds).execute();
}

export function stateOf(db: Db, sessionId: string, alertId: string) {
  return db
    .selectFrom('alert_states')
    .selectAll()
    .where('session_id', '=', sessionId)
    .where('alert_id', '=', alertId)
    .executeTakeFirst();
}

/**
 * Writes a state where it is still what was read (`version`, or no row: null). False when another
 * transaction changed it first: the caller reads it again and evaluates anew.
 */
export async function compareAndSetState(
  db: Db,
  row: Omit<StateRow, 'version'>,
  readVersion: number | null,
): Promise<boolean> {
  if (readVersion === null) {
    const inserted = await db
      .insertInto('alert_states')
      .values({ ...row, version: 0 })
      .onConflict((oc) => oc.columns(['session_id', 'alert_id']).doNothing())
      .returning('alert_id')
      .execute();
    return inserted.length === 1;
  }
  const updated = await db
    .updateTable('alert_states')
    .set({
      pending_since: row.pending_since,
      incident_id: row.incident_id,
      notified_at: row.notified_at,
      player_id: row.player_id,
      version: readVersion + 1,
    })
    .where('session_id', '=', row.session_id)
    .where('alert_id', '=', row.alert_id)
    .where('version', '=', readVersion)
    .returning('alert_id')
    .execute();
  return updated.length === 1;
}

/** The states of a session with an open incident, locked in alert order (a session's end). */
export function openStatesOf(db: Db, sessionId: string, lock: boolean) {
  const q = db
    .selectFrom('alert_states')
    .selectAll()
    .where('session_id', '=', sessionId)
    .where('incident_id', 'is not', null)
    .orderBy('alert_id');
  return (lock ? q.forUpdate() : q).execute();
}

/** A session's end: its states go (its incidents are resolved by the caller). */
export async function clearStates(db: Db, sessionId: string) {
  await db.deleteFrom('alert_states').where('session_id', '=', sessionId).execute();
}

/** A deleted session (retention) takes its states and incidents along. */
export async function forgetSession(db: Db, sessionId: string) {
  await db.deleteFrom('alert_states').where('session_id', '=', sessionId).execute();
  await db.deleteFrom('alert_incidents').where('session_id', '=', sessionId).execute();
}

/**
 * Erasure (the players module): up to `limit` rule states and `limit` incidents of these sessions, in
 * one transaction; how many rows went.
 */
export async function eraseSessions(db: Kysely<Database>, sessionIds: string[], limit: number) {
  if (sessionIds.length === 0) return 0;
  return db.transaction().execute(async (trx) => {
    // One statement: the first `limit` states of these sessions, by their key.
    const states = await trx
      .deleteFrom('alert_states')
      .where(({ eb, refTuple, selectFrom }) =>
        eb(
          refTuple('session_id', 'alert_id'),
          'in',
          selectFrom('alert_states')
            .select(['session_id', 'alert_id'])
            .where('session_id', 'in', sessionIds)
            .limit(limit)
            .$asTuple('session_id', 'alert_id'),
        ),
      )
      .executeTakeFirst();
    const incidents = (
      await trx
        .selectFrom('alert_incidents')
        .select('incident_id')
        .where('session_id', 'in', sessionIds)
        .limit(limit)
        .execute()
    ).map((r) => r.incident_id);
    if (incidents.length > 0)
      await trx.deleteFrom('alert_incidents').where('incident_id', 'in', incidents).execute();
    return Number(states.numDeletedRows) + incidents.length;
  });
}

// --- incidents --------------------------------------------------------------------------------------

export async function insertIncident(db: Db, row: IncidentRow) {
  await db.insertInto('alert_incidents').values(row).execute();
}

export async function noteNotification(db: Db, incidentId: string, at: number) {
  await db
    .updateTable('alert_incidents')
    .set((eb) => ({ notifications: eb('notifications', '+', 1), last_notified_at: at }))
    .where('incident_id', '=', incidentId)
    .execute();
}

export async function resolveIncident(
  db: Db,
  incidentId: string,
  at: number,
  reason: 'condition_cleared' | 'session_ended',
  eventId: string | null,
) {
  await db
    .updateTable('alert_incidents')
    .set({ resolved_at: at, resolved_reason: reason, resolved_event_id: eventId })
    .where('incident_id', '=', incidentId)
    .where('resolved_at', 'is', null)
    .execute();
}

export function findIncidents(db: Db, incidentIds: string[]) {
  return db.selectFrom('alert_incidents').selectAll().where('incident_id', 'in', incidentIds).execute();
}

/** A rule's incidents, newest first; `open` filters by whether they are resolved. */
export function listIncidents(db: Db, alertId: string, open: boolean | undefined, page: PageRequest) {
  let base = db.selectFrom('alert_incidents').where('alert_id', '=', alertId);
  if (open !== undefined) base = base.where('resolved_at', open ? 'is' : 'is not', null);
  return readPage(
    db,
    base,
    (b) => b.selectAll(),
    { column: 'incident_id', direction: 'desc', id: null },
    page,
  );
}
