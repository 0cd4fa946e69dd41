import type { Kysely } from 'kysely';
import {
  type CompiledStatement,
  type Database,
  type DialectName,
  flatColumns,
  runStatements,
  Statement,
  StatementFamily,
  type Storage,
} from '../../storage/index.ts';
import type {
  WebhookAttemptsTable,
  WebhookDeliveriesTable,
  WebhookEndpointsTable,
  WebhookFanoutTable,
} from '../../storage/schema.ts';
import type { BulkTable } from '../../storage/storage.ts';

/** Queries on the webhooks module's tables. Everything that writes takes the caller's transaction. */

export type EndpointRow = WebhookEndpointsTable;
export type DeliveryRow = WebhookDeliveriesTable;
export type AttemptRow = WebhookAttemptsTable;
export type FanoutRow = WebhookFanoutTable;

type Db = Kysely<Database>;

export async function insertEndpoint(db: Db, row: EndpointRow) {
  await db.insertInto('webhook_endpoints').values(row).execute();
}

/** How many endpoints the tenant has (the quota counts them). */
export async function countEndpoints(db: Db, tenantId: string): Promise<number> {
  const row = await db
    .selectFrom('webhook_endpoints')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('tenant_id', '=', tenantId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** `lock` (where rows lock): read `for update`, so a change decided on what was read cannot race another. */
export async function findEndpoint(db: Db, tenantId: string, webhookId: string, lock = false) {
  const q = db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('webhook_id', '=', webhookId)
    .where('tenant_id', '=', tenantId);
  return (lock ? q.forUpdate() : q).executeTakeFirst();
}

export async function listEndpoints(db: Db, tenantId: string, limit: number) {
  const [rows, count] = await Promise.all([
    db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .orderBy('webhook_id')
      .limit(limit)
      .execute(),
    db
      .selectFrom('webhook_endpoints')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('tenant_id', '=', tenantId)
      .executeTakeFirstOrThrow(),
  ]);
  return { rows, totalCount: Number(count.n) };
}

export async function updateEndpoint(
  db: Db,
  tenantId: string,
  webhookId: string,
  changes: Partial<Omit<EndpointRow, 'webhook_id' | 'tenant_id' | 'created_at'>>,
) {
  return db
    .updateTable('webhook_endpoints')
    .set(changes)
    .where('webhook_id', '=', webhookId)
    .where('tenant_id', '=', tenantId)
    .returningAll()
    .executeTakeFirst();
}

/** Deletes an endpoint with its deliveries and their attempts. */
export async function deleteEndpoint(db: Db, tenantId: string, webhookId: string): Promise<boolean> {
  const found = await findEndpoint(db, tenantId, webhookId);
  if (!found) return false;
  await db.deleteFrom('webhook_attempts').where('webhook_id', '=', webhookId).execute();
  await db.deleteFrom('webhook_deliveries').where('webhook_id', '=', webhookId).execute();
  await db.deleteFrom('webhook_endpoints').where('webhook_id', '=', webhookId).execute();
  return true;
}

/** The enabled endpoints of these tenants, with just what matching a message needs. */
export async function enabledEndpointFilters(db: Db, tenantIds: string[]) {
  return db
    .selectFrom('webhook_endpoints')
    .select(['webhook_id', 'tenant_id', 'types', 'event_types'])
    .where('tenant_id', 'in', tenantIds)
    .where('enabled', '=', 1)
    .execute();
}

export async function endpointsByIds(db: Db, webhookIds: string[]) {
  if (webhookIds.length === 0) return [];
  return db.selectFrom('webhook_endpoints').selectAll().where('webhook_id', 'in', webhookIds).execute();
}

export const DELIVERIES_TABLE: BulkTable<'webhook_deliveries'> = {
  table: 'webhook_deliveries',
  columns: [
    { name: 'delivery_id', type: 'text' },
    { name: 'webhook_id', type: 'text' },
    { name: 'tenant_id', type: 'text' },
    { name: 'type', type: 'text' },
    { name: 'event_type', type: 'text' },
    { name: 'payload', type: 'text' },
    { name: 'status', type: 'text' },
    { name: 'attempts', type: 'integer' },
    { name: 'next_attempt_at', type: 'bigint' },
    { name: 'created_at', type: 'bigint' },
  ],
  conflict: ['delivery_id'],
};

/** New pending deliveries, as value lists in DELIVERIES_TABLE's column order. */
export async function insertDeliveries(storage: Storage, trx: Db, values: unknown[][]) {
  if (values.length === 0) return;
  // Bound parameters per statement are limited; the SQLite path runs one row at a time anyway.
  const perChunk = Math.max(1, Math.floor(storage.maxBindParameters / DELIVERIES_TABLE.columns.length));
  for (let i = 0; i < values.length; i += perChunk) {
    await storage.bulk.insertIgnoringConflicts(trx, DELIVERIES_TABLE, values.slice(i, i + perChunk));
  }
}

/** Fan-out rows (one per ingestion group and tenant), written in the ingestion transaction. */
export async function insertFanout(storage: Pick<Storage, 'pipeline'>, trx: Db, rows: FanoutRow[]) {
  if (rows.length === 0) return;
  // Nothing reads its answer: on SQLite it costs the ingestion transaction no round trip.
  await storage.pipeline(trx, trx.insertInto('webhook_fanout').values(rows).compile());
}

/** Whether any fan-out row waits (read outside a transaction: SQLite's writer is not held). */
export async function anyFanout(db: Db): Promise<boolean> {
  return (
    (await db.selectFrom('webhook_fanout').select('fanout_id').limit(1).executeTakeFirst()) !== undefined
  );
}

/**
 * Takes the oldest fan-out rows out of the table, for the caller's transaction to expand: they are
 * deleted here and come back if it rolls back. The delete comes first, so on SQLite the transaction
 * writes from its first statement (no lock upgrade between processes); on PostgreSQL rows another
 * process is expanding are passed over.
 */
export async function takeFanout(trx: Db, options: { limit: number; lock: boolean }) {
  const rows = await trx
    .deleteFrom('webhook_fanout')
    .where('fanout_id', 'in', (eb) =>
      eb
        .selectFrom('webhook_fanout')
        .select('fanout_id')
        .orderBy('fanout_id')
        .limit(options.limit)
        .$if(options.lock, (qb) => qb.forUpdate().skipLocked()),
    )
    .returningAll()
    .execute();
  return rows.sort((a, b) => (a.fanout_id < b.fanout_id ? -1 : a.fanout_id > b.fanout_id ? 1 : 0));
}

/** Deliveries that are finished the moment they are written (their endpoint was disabled meanwhile). */
export async function insertFailedDeliveries(db: Db, rows: DeliveryRow[]) {
  const perChunk = 500;
  for (let i = 0; i < rows.length; i += perChunk) {
    await db
      .insertInto('webhook_deliveries')
      .values(rows.slice(i, i + perChunk))
      .execute();
  }
}

/** The dispatcher's statements run prepared on PostgreSQL (`CompiledStatement.prepare`). */
const PREPARE = { prepare: true };

/** An endpoint's count of deliveries this process holds (claimed, not settled), for `claimDue`. */
const HELD_VALUES = '(cast(? as text), cast(? as integer))';

/**
 * The claim of the oldest due deliveries, whatever their endpoint, as one statement: the candidates
 * (`want` rows in the index order of (status, next_attempt_at); where rows lock, `for update skip locked`,
 * so rows another process is claiming are passed over), each endpoint's first ones while its count
 * (what this process holds of it, plus these) stays within `cap`, the oldest `free` of those moved one
 * lease ahead under the claim id, the condition checked again (no double claim where rows do not lock).
 * Made once per number of endpoints held and per locking.
 */
const claimDueFamily = (lock: boolean) =>
  new StatementFamily((heldEndpoints) => {
    const held = heldEndpoints > 0;
    return (
      'with ' +
      (held
        ? `h (webhook_id, held) as (values ${Array(heldEndpoints).fill(HELD_VALUES).join(', ')}), `
        : '') +
      'c as (select delivery_id, webhook_id, next_attempt_at from webhook_deliveries ' +
      "where status = 'pending' and next_attempt_at <= ? order by next_attempt_at limit ?" +
      (lock ? ' for update skip locked' : '') +
      '), ' +
      'r as (select c.delivery_id, c.next_attempt_at, row_number() over ' +
      '(partition by c.webhook_id order by c.next_attempt_at, c.delivery_id)' +
      (held ? ' + coalesce(h.held, 0)' : '') +
      ' as k from c' +
      (held ? ' left join h on h.webhook_id = c.webhook_id' : '') +
      '), ' +
      'p as (select delivery_id, row_number() over (order by next_attempt_at, delivery_id) as n ' +
      'from r where k <= ?) ' +
      'update webhook_deliveries set next_attempt_at = ?, claim_id = ? ' +
      'where delivery_id in (select delivery_id from p where n <= ?) ' +
      "and status = 'pending' and next_attempt_at <= ? returning *"
    );
  }, PREPARE);
const CLAIM_DUE = claimDueFamily(false);
const CLAIM_DUE_LOCKING = claimDueFamily(true);

/** The endpoints of the deliveries a claim took (they are pending, due at its lease's end, under its id). */
const ENDPOINTS_OF_CLAIM = new Statement(
  'select * from webhook_endpoints where webhook_id in (select webhook_id from webhook_deliveries ' +
    "where status = 'pending' and next_attempt_at = ? and claim_id = ?)",
  PREPARE,
);

/**
 * Claims due deliveries in one `Storage.atomically` (one message to SQLite's writer, one query to
 * PostgreSQL): the deliveries claimed (`claimDueFamily` above), and their endpoints' rows. `held` lists the
 * endpoints the process holds deliveries of, with how many.
 */
export async function claimDue(
  storage: Pick<Storage, 'atomically' | 'dialect' | 'skipLocked'>,
  options: {
    now: number;
    leaseUntil: number;
    claimId: string;
    /** Candidates read. */
    want: number;
    /** Most deliveries claimed. */
    free: number;
    /** Most deliveries held per endpoint. */
    cap: number;
    held: readonly (readonly [webhookId: string, count: number])[];
  },
): Promise<{ claimed: DeliveryRow[]; endpoints: EndpointRow[] }> {
  const { now, leaseUntil, claimId } = options;
  const { dialect } = storage;
  const [claimed, endpoints] = await storage.atomically([
    (storage.skipLocked ? CLAIM_DUE_LOCKING : CLAIM_DUE)
      .of(options.held.length)
      .bind(dialect, [
        ...options.held.flat(),
        now,
        options.want,
        options.cap,
        leaseUntil,
        claimId,
        options.free,
        now,
      ]),
    ENDPOINTS_OF_CLAIM.bind(dialect, [leaseUntil, claimId]),
  ]);
  return { claimed: claimed as unknown as DeliveryRow[], endpoints: endpoints as unknown as EndpointRow[] };
}

/** One endpoint's due deliveries, oldest first (its own index range, whatever other endpoints hold). */
export async function dueDeliveriesOf(
  trx: Db,
  webhookId: string,
  options: { now: number; limit: number; lock: boolean },
) {
  return trx
    .selectFrom('webhook_deliveries')
    .select(['delivery_id', 'webhook_id'])
    .where('webhook_id', '=', webhookId)
    .where('status', '=', 'pending')
    .where('next_attempt_at', '<=', options.now)
    .orderBy('delivery_id')
    .limit(options.limit)
    .$if(options.lock, (qb) => qb.forUpdate().skipLocked())
    .execute();
}

export async function enabledEndpointIds(db: Db) {
  return (
    await db.selectFrom('webhook_endpoints').select('webhook_id').where('enabled', '=', 1).execute()
  ).map((r) => r.webhook_id);
}

/**
 * Claims deliveries: moves them one lease ahead under a new claim id. The condition is re-checked,
 * so a row another process claimed in the meantime is not returned (no double send).
 */
export async function claimDeliveries(
  trx: Db,
  ids: string[],
  options: { now: number; leaseUntil: number; claimId: string },
) {
  if (ids.length === 0) return [];
  return trx
    .updateTable('webhook_deliveries')
    .set({ next_attempt_at: options.leaseUntil, claim_id: options.claimId })
    .where('delivery_id', 'in', ids)
    .where('status', '=', 'pending')
    .where('next_attempt_at', '<=', options.now)
    .returningAll()
    .execute();
}

/** Gives claimed deliveries back, due now (a stopping process hands its work to the others). */
export async function releaseClaims(db: Db, claims: { deliveryId: string; claimId: string }[], now: number) {
  for (const c of claims) {
    await db
      .updateTable('webhook_deliveries')
      .set({ next_attempt_at: now, claim_id: null })
      .where('delivery_id', '=', c.deliveryId)
      .where('claim_id', '=', c.claimId)
      .where('status', '=', 'pending')
      .execute();
  }
}

/** Rows per statement of `settleAttempted` (9 or 7 parameters each: inside every backend's limit). */
const RESULTS_CHUNK = 500;

const ATTEMPT_COLUMNS = [
  'attempt_id',
  'delivery_id',
  'webhook_id',
  'attempted_at',
  'status_code',
  'latency_ms',
  'error',
] as const satisfies readonly (keyof AttemptRow)[];

const INSERT_ATTEMPTS = StatementFamily.insert('webhook_attempts', ATTEMPT_COLUMNS);

/** Each value typed, so PostgreSQL reads the parameters of the `values` list as the columns' types. */
const SETTLE_VALUES =
  '(cast(? as text), cast(? as text), cast(? as text), cast(? as integer), cast(? as bigint), ' +
  'cast(? as integer), cast(? as text), cast(? as bigint), cast(? as bigint))';

/** Many attempted deliveries settled by one update, each only while its claim holds. */
const SETTLE_ATTEMPTED = new StatementFamily(
  (n) =>
    'with v (delivery_id, claim_id, status, attempts, last_attempt_at, last_status_code, last_error, ' +
    `next_attempt_at, completed_at) as (values ${Array(n).fill(SETTLE_VALUES).join(', ')}) ` +
    'update webhook_deliveries set status = v.status, attempts = v.attempts, ' +
    'last_attempt_at = v.last_attempt_at, last_status_code = v.last_status_code, last_error = v.last_error, ' +
    'next_attempt_at = coalesce(v.next_attempt_at, webhook_deliveries.next_attempt_at), ' +
    'completed_at = v.completed_at, claim_id = null from v ' +
    // The `in` finds each row by its key: without it SQLite reads the whole table for every statement.
    'where webhook_deliveries.delivery_id in (select delivery_id from v) ' +
    'and webhook_deliveries.delivery_id = v.delivery_id and webhook_deliveries.claim_id = v.claim_id',
);

const LOCK_DELIVERIES = StatementFamily.lockInOrder('webhook_deliveries', 'delivery_id');

/**
 * Locks delivery rows in id order (PostgreSQL: `select … order by delivery_id for update`), the order a
 * replay takes them in: an update of several by `in (…)` or a join locks them in the plan's order.
 */
export async function lockDeliveries(db: Db, dialect: DialectName, deliveryIds: readonly string[]) {
  await runStatements(db, lockDeliveriesStatements(dialect, deliveryIds));
}

/** `lockDeliveries` as statements, for `Storage.atomically`. */
export function lockDeliveriesStatements(
  dialect: DialectName,
  deliveryIds: readonly string[],
): CompiledStatement[] {
  const sorted = [...deliveryIds].sort();
  const statements: CompiledStatement[] = [];
  for (let i = 0; i < sorted.length; i += RESULTS_CHUNK) {
    const chunk = sorted.slice(i, i + RESULTS_CHUNK);
    statements.push(LOCK_DELIVERIES.of(chunk.length).bind(dialect, chunk));
  }
  return statements;
}

/** A claimed delivery's attempt and the state it leaves the delivery in. */
export interface AttemptResult {
  attempt: AttemptRow;
  claimId: string;
  status: 'delivered' | 'pending' | 'failed';
  /** Attempts since the delivery was (re)queued, this one included. */
  attempts: number;
  /** When it is due again; null keeps the time the claim gave it (a settled delivery is never due). */
  nextAttemptAt: number | null;
  completedAt: number | null;
}

/**
 * Settles attempted deliveries and records their attempts, a few statements for any number (fixed SQL,
 * no query builder: the dispatcher's results are its hottest write). A delivery whose claim no longer
 * holds (retried, replayed, deleted) is left alone; its attempt is recorded all the same. Where rows
 * lock, the caller locks them first (`lockDeliveries`).
 */
export async function settleAttempted(db: Db, dialect: DialectName, results: readonly AttemptResult[]) {
  await runStatements(db, settleAttemptedStatements(dialect, results));
}

/** `settleAttempted` as statements, for `Storage.atomically`. */
export function settleAttemptedStatements(
  dialect: DialectName,
  results: readonly AttemptResult[],
): CompiledStatement[] {
  const statements: CompiledStatement[] = [];
  for (let i = 0; i < results.length; i += RESULTS_CHUNK) {
    const chunk = results.slice(i, i + RESULTS_CHUNK);
    statements.push(
      SETTLE_ATTEMPTED.of(chunk.length).bind(
        dialect,
        chunk.flatMap((r) => [
          r.attempt.delivery_id,
          r.claimId,
          r.status,
          r.attempts,
          r.attempt.attempted_at,
          r.attempt.status_code,
          r.attempt.error,
          r.nextAttemptAt,
          r.completedAt,
        ]),
      ),
      INSERT_ATTEMPTS.of(chunk.length).bind(
        dialect,
        flatColumns(
          chunk.map((r) => r.attempt),
          ATTEMPT_COLUMNS,
        ),
      ),
    );
  }
  return statements;
}

/** Which of `n` endpoints are in a run of failures (`failing_since` or `outage_since` set). */
const IN_FAILING_RUN = new StatementFamily(
  (n) =>
    `select webhook_id from webhook_endpoints where webhook_id in (${Array(n).fill('?').join(', ')}) ` +
    'and (failing_since is not null or outage_since is not null)',
);

/**
 * The statement that reads which of these endpoints are in a run of failures (a success ends it:
 * `recordEndpointSuccesses`); rows `{ webhook_id }`. At most `RESULTS_CHUNK` ids.
 */
export function inFailingRunStatement(
  dialect: DialectName,
  webhookIds: readonly string[],
): CompiledStatement {
  if (webhookIds.length === 0 || webhookIds.length > RESULTS_CHUNK) throw new Error('1 to 500 endpoint ids');
  return IN_FAILING_RUN.of(webhookIds.length).bind(dialect, webhookIds);
}

/** Settles a claimed delivery; does nothing when the claim no longer holds (retried, replayed, deleted). */
export async function settleDelivery(
  db: Db,
  deliveryId: string,
  claimId: string,
  changes: Partial<Omit<DeliveryRow, 'delivery_id'>>,
) {
  await db
    .updateTable('webhook_deliveries')
    .set({ ...changes, claim_id: null })
    .where('delivery_id', '=', deliveryId)
    .where('claim_id', '=', claimId)
    .execute();
}

/** Locks endpoint rows in id order (PostgreSQL: `select … for update`), before a transaction updates several. */
export async function lockEndpoints(db: Db, webhookIds: string[]) {
  if (webhookIds.length === 0) return;
  await db
    .selectFrom('webhook_endpoints')
    .select('webhook_id')
    .where('webhook_id', 'in', webhookIds)
    .orderBy('webhook_id')
    .forUpdate()
    .execute();
}

/**
 * A failed attempt: `failing_since` starts unless it runs already. `retried`: the attempt was a
 * retry of a delivery that had failed before, so the run is an outage (`outage_since`), reported
 * as `webhook.endpoint.recovered` when it ends; a single failure that its retry mends is not.
 * Both updates match nothing while the run is known, so a failing endpoint costs no writes.
 */
export async function recordEndpointFailure(db: Db, webhookId: string, retried: boolean, now: number) {
  await db
    .updateTable('webhook_endpoints')
    .set({ failing_since: now })
    .where('webhook_id', '=', webhookId)
    .where('failing_since', 'is', null)
    .execute();
  if (!retried) return;
  await db
    .updateTable('webhook_endpoints')
    .set((eb) => ({ outage_since: eb.fn.coalesce('failing_since', eb.val(now)) }))
    .where('webhook_id', '=', webhookId)
    .where('outage_since', 'is', null)
    .execute();
}

/**
 * Successful attempts end the endpoints' failing runs. Returns the endpoints whose run was an outage,
 * with its start, for `webhook.endpoint.recovered`. `lock` (where rows lock: PostgreSQL): the rows
 * are read `for update`, so when two processes settle successes of one endpoint at once, the second
 * waits, then finds the run cleared: the recovery is reported once. A healthy endpoint matches
 * nothing: no lock, no write.
 */
export async function recordEndpointSuccesses(db: Db, webhookIds: string[], lock: boolean) {
  if (webhookIds.length === 0) return [];
  const q = db
    .selectFrom('webhook_endpoints')
    .select(['webhook_id', 'tenant_id', 'url', 'outage_since'])
    .where('webhook_id', 'in', webhookIds)
    .where((eb) => eb.or([eb('failing_since', 'is not', null), eb('outage_since', 'is not', null)]))
    .orderBy('webhook_id');
  const ended = await (lock ? q.forUpdate() : q).execute();
  if (ended.length === 0) return [];
  await db
    .updateTable('webhook_endpoints')
    .set({ failing_since: null, outage_since: null })
    .where(
      'webhook_id',
      'in',
      ended.map((e) => e.webhook_id),
    )
    .execute();
  return ended.filter((e): e is typeof e & { outage_since: number } => e.outage_since !== null);
}

/**
 * Disables the endpoints among `webhookIds` that have failed since `failingBefore` or earlier. Their
 * run becomes an outage (`outage_since`), so the first success after a re-enable reports it.
 */
export async function disableFailingEndpoints(
  db: Db,
  webhookIds: string[],
  failingBefore: number,
  now: number,
) {
  if (webhookIds.length === 0) return [];
  return db
    .updateTable('webhook_endpoints')
    .set((eb) => ({
      enabled: 0,
      disabled_reason: 'failing',
      updated_at: now,
      outage_since: eb.fn.coalesce('outage_since', 'failing_since'),
    }))
    .where('webhook_id', 'in', webhookIds)
    .where('enabled', '=', 1)
    .where('failing_since', '<=', failingBefore)
    .returning(['webhook_id', 'tenant_id', 'url'])
    .execute();
}

/** Marks an endpoint's pending deliveries failed (it was disabled). */
export async function failPending(db: Db, webhookId: string, reason: string, now: number) {
  await db
    .updateTable('webhook_deliveries')
    .set({ status: 'failed', last_error: reason, completed_at: now, claim_id: null })
    .where('webhook_id', '=', webhookId)
    .where('status', '=', 'pending')
    .execute();
}

export async function findDelivery(db: Db, webhookId: string, deliveryId: string) {
  return db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('delivery_id', '=', deliveryId)
    .where('webhook_id', '=', webhookId)
    .executeTakeFirst();
}

/** One page of an endpoint's delivery log, newest first, after the delivery `after`. */
export async function listDeliveries(
  db: Db,
  webhookId: string,
  options: { status?: string; after?: string; limit: number },
) {
  // One index range per status (webhook, status, id), merged: no sort of the whole log.
  const statuses = options.status !== undefined ? [options.status] : ['pending', 'delivered', 'failed'];
  const parts = await Promise.all(
    statuses.map((status) =>
      db
        .selectFrom('webhook_deliveries')
        .selectAll()
        .where('webhook_id', '=', webhookId)
        .where('status', '=', status)
        .$if(options.after !== undefined, (qb) => qb.where('delivery_id', '<', options.after!))
        .orderBy('delivery_id', 'desc')
        .limit(options.limit)
        .execute(),
    ),
  );
  return parts
    .flat()
    .sort((a, b) => (a.delivery_id < b.delivery_id ? 1 : a.delivery_id > b.delivery_id ? -1 : 0))
    .slice(0, options.limit);
}

export async function attemptsOf(db: Db, deliveryIds: string[]) {
  if (deliveryIds.length === 0) return [];
  return db
    .selectFrom('webhook_attempts')
    .selectAll()
    .where('delivery_id', 'in', deliveryIds)
    .orderBy('delivery_id')
    .orderBy('attempt_id')
    .execute();
}

/** Queues deliveries again, due now, with a fresh retry schedule; the same delivery id (webhook-id). */
export async function requeue(
  db: Db,
  webhookId: string,
  where: { deliveryId: string } | { fromDeliveryId: string },
  now: number,
  options: { lockInOrder?: boolean } = {},
): Promise<number> {
  // A replay updates many rows while the sender settles its batches (in delivery id order): where
  // rows are locked (PostgreSQL), take them in the same order first, or the two can deadlock.
  if (options.lockInOrder && 'fromDeliveryId' in where) {
    return db.transaction().execute(async (trx) => {
      await trx
        .selectFrom('webhook_deliveries')
        .select('delivery_id')
        .where('webhook_id', '=', webhookId)
        .where('delivery_id', '>=', where.fromDeliveryId)
        .orderBy('delivery_id')
        .forUpdate()
        .execute();
      return requeue(trx, webhookId, where, now);
    });
  }
  const result = await db
    .updateTable('webhook_deliveries')
    .set({ status: 'pending', attempts: 0, next_attempt_at: now, claim_id: null, completed_at: null })
    .where('webhook_id', '=', webhookId)
    .$if('deliveryId' in where, (qb) =>
      qb.where('delivery_id', '=', (where as { deliveryId: string }).deliveryId),
    )
    .$if('fromDeliveryId' in where, (qb) =>
      qb.where('delivery_id', '>=', (where as { fromDeliveryId: string }).fromDeliveryId),
    )
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/**
 * Outbox depth and the creation time of the oldest pending delivery; fan-out rows not expanded yet
 * count with the deliveries they stand for.
 */
export async function outboxStats(db: Db) {
  const [row, fan] = await Promise.all([
    db
      .selectFrom('webhook_deliveries')
      .select((eb) => [eb.fn.countAll<number>().as('depth'), eb.fn.min('created_at').as('oldest')])
      .where('status', '=', 'pending')
      .executeTakeFirstOrThrow(),
    db
      .selectFrom('webhook_fanout')
      .select((eb) => [eb.fn.sum<number>('deliveries').as('depth'), eb.fn.min('created_at').as('oldest')])
      .executeTakeFirstOrThrow(),
  ]);
  const oldest = [row.oldest, fan.oldest].filter((v) => v !== null).map(Number);
  return {
    depth: Number(row.depth) + Number(fan.depth ?? 0),
    oldestCreatedAt: oldest.length === 0 ? null : Math.min(...oldest),
  };
}

/**
 * Deletes up to `limit` finished deliveries (and their attempts) created before the delivery id
 * `beforeId` (ids are time-ordered). Returns how many deliveries went.
 */
export async function purgeFinished(db: Db, beforeId: string, limit: number): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const ids = (
      await trx
        .selectFrom('webhook_deliveries')
        .select('delivery_id')
        .where('delivery_id', '<', beforeId)
        .where('status', '!=', 'pending')
        .limit(limit)
        .execute()
    ).map((r) => r.delivery_id);
    if (ids.length === 0) return 0;
    await trx.deleteFrom('webhook_attempts').where('delivery_id', 'in', ids).execute();
    await trx.deleteFrom('webhook_deliveries').where('delivery_id', 'in', ids).execute();
    return ids.length;
  });
}

/** The smallest UUIDv7 of a millisecond: every id allocated at or after `ms` sorts at or above it. */
export function uuidv7Floor(ms: number): string {
  const hex = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0').slice(-12);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-7000-8000-000000000000`;
}
