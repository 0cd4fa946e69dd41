import type { Generated } from 'kysely';

/**
 * The database as Kysely sees it. Each module owns its tables (see the module READMEs);
 * this file only declares their shapes so one query layer can be type-checked.
 * Times are Unix milliseconds in BIGINT columns; JSON is stored as text.
 */
export interface Database {
  server_keys: ServerKeysTable;
  tenants: TenantsTable;
  oauth_clients: OAuthClientsTable;
  player_token_revocations: PlayerTokenRevocationsTable;
  sessions: SessionsTable;
  events: EventsTable;
  commands: CommandsTable;
  command_answers: CommandAnswersTable;
  command_batches: CommandBatchesTable;
  command_batch_refusals: CommandBatchRefusalsTable;
  session_streams: SessionStreamsTable;
  stream_intervals: StreamIntervalsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_fanout: WebhookFanoutTable;
  webhook_attempts: WebhookAttemptsTable;
  campaigns: CampaignsTable;
  challenges: ChallengesTable;
  claims: ClaimsTable;
  alerts: AlertsTable;
  alert_states: AlertStatesTable;
  alert_incidents: AlertIncidentsTable;
  screenshots: ScreenshotsTable;
  player_erasures: PlayerErasuresTable;
  player_erasure_sessions: PlayerErasureSessionsTable;
  audit_log: AuditLogTable;
}

export interface ServerKeysTable {
  kid: string;
  /** `signing` (JWT key pair, JWKs as JSON text) or `digest` (key for keyed secret digests). */
  purpose: string;
  material: string;
  created_at: number;
}

export interface TenantsTable {
  tenant_id: string;
  name: string;
  created_at: number;
  /** The tenant's event retention in days (migration 010): null follows LIVELINE_EVENT_RETENTION_DAYS, 0 keeps forever. */
  event_retention_days: Generated<number | null>;
}

export interface OAuthClientsTable {
  client_id: string;
  tenant_id: string;
  name: string | null;
  secret_digest: string;
  /** Space-separated scope list. */
  scopes: string;
  created_at: number;
  revoked_at: number | null;
  /** The secret a rotation replaced (its keyed digest), and until when it still works. */
  previous_secret_digest: string | null;
  previous_secret_expires_at: number | null;
}

/** Device tokens of a player issued before `not_before` are refused (auth: revocation). */
export interface PlayerTokenRevocationsTable {
  tenant_id: string;
  player_id: string;
  not_before: number;
}

export interface SessionsTable {
  session_id: string;
  tenant_id: string;
  player_id: string;
  tenant_cohort_id: string | null;
  /** JSON text of the device description. */
  device: string;
  status: string;
  started_at: number;
  last_seen_at: number;
  ended_at: number | null;
  end_reason: string | null;
}

export interface EventsTable {
  session_id: string;
  event_id: string;
  event_type: string;
  timestamp: number;
  streaming_session_id: string | null;
  received_at: number;
  /** The event as returned to clients, as JSON text. */
  body: string;
}

export interface CommandsTable {
  command_id: string;
  session_id: string;
  tenant_id: string;
  name: string;
  /** JSON text of the command's data as the device receives it. */
  data: string;
  /** queued | delivered | acknowledged | failed | expired | cancelled */
  status: string;
  issued_at: number;
  expires_at: number;
  delivered_at: number | null;
  settled_at: number | null;
  /** JSON text of the device's error, for failed commands. */
  error: string | null;
  idempotency_key: string | null;
  request_hash: string | null;
  /** The cohort-wide command this one is part of (migration 013); null for a per-session command. */
  batch_id: string | null;
}

/** A cohort-wide command (CONTRACT §12, migration 013): its commands carry its id in `batch_id`. */
export interface CommandBatchesTable {
  batch_id: string;
  tenant_id: string;
  tenant_cohort_id: string;
  name: string;
  issued_at: number;
  /** Live sessions of the cohort it was sent to. */
  total: number;
  idempotency_key: string | null;
  request_hash: string | null;
  /** The first 202 body, exactly as sent; null until the batch has been issued. */
  answer: string | null;
}

/** A session of a batch whose state refused the command (no command row was written for it). */
export interface CommandBatchRefusalsTable {
  batch_id: string;
  session_id: string;
  code: string;
  detail: string;
}

/** The first answer to a command request with an Idempotency-Key, kept to be sent again as it was. */
export interface CommandAnswersTable {
  command_id: string;
  status_code: number;
  /** The answer's body, exactly as it was sent. */
  body: string;
  created_at: number;
}

export interface SessionStreamsTable {
  session_id: string;
  /** idle | starting | streaming | stopping */
  stream_state: string;
  streaming_session_id: string | null;
  resolution: number | null;
  aspectratio: number | null;
  stream_started_at: number | null;
  /** The command a `starting`/`stopping` stream waits on (null when started or stopped by the app). */
  stream_command_id: string | null;
  /** idle | starting | recording | stopping */
  recording_state: string;
  recording_id: string | null;
  recording_started_at: number | null;
  recording_command_id: string | null;
  updated_at: number;
}

export interface StreamIntervalsTable {
  streaming_session_id: string;
  session_id: string;
  tenant_id: string;
  player_id: string;
  started_at: number;
  stopped_at: number | null;
  stop_reason: string | null;
}

export interface WebhookEndpointsTable {
  webhook_id: string;
  tenant_id: string;
  url: string;
  description: string | null;
  /** JSON array of event types (filters `session.event`); null: every type. */
  event_types: string | null;
  /** JSON array of message types; null: every type. */
  types: string | null;
  /** 1 or 0. */
  enabled: number;
  /** `failing` when the server disabled it, `manual` when a user did. */
  disabled_reason: string | null;
  /** `whsec_…` as shown to the tenant: webhook secrets must sign, so they are stored, not digested. */
  secret: string;
  /** The secret before the last rotation, still signing until `previous_secret_until`. */
  previous_secret: string | null;
  previous_secret_until: number | null;
  /** First failed attempt since the last success (null when the last attempt succeeded). */
  failing_since: number | null;
  /**
   * Start of a failing run to report as `webhook.endpoint.recovered` at the next success: set when a
   * retry failed or the endpoint was disabled for failing; kept by a re-enable (migration 017).
   */
  outage_since: number | null;
  /** 1: `session.event` messages go out in batches (`session.events`, up to 100 per request); 0: one by one. */
  batch: number;
  created_at: number;
  updated_at: number;
}

/**
 * One ingestion group's `session.event` messages for one tenant (up to 500), with the endpoints each goes to;
 * the dispatcher expands it into deliveries and deletes it in one transaction (migration 011).
 */
export interface WebhookFanoutTable {
  fanout_id: string;
  tenant_id: string;
  /** The stored events' JSON texts back to back (rows of before: the messages, each as sent). */
  messages: string;
  /**
   * JSON `{"c":[[receivedAt, tenantCohortId], ...],"m":[[eventType, length, c], ...]}`: where each
   * text in `messages` ends (UTF-16 code units) and the context its message is built with (rows of
   * before: `[[eventType, length], ...]`); see `modules/webhooks/fanout-row.ts`.
   */
  layout: string;
  /** JSON `[[webhookId, null | [index, ...]], ...]`: null sends every message to that endpoint. */
  targets: string;
  /** How many per-event deliveries it stands for (the outbox depth counts them). */
  deliveries: number;
  created_at: number;
}

export interface WebhookDeliveriesTable {
  /** Also the `webhook-id` header: the same on every attempt, retry and replay. */
  delivery_id: string;
  webhook_id: string;
  tenant_id: string;
  type: string;
  event_type: string | null;
  /** The exact body sent (and signed): `{type, timestamp, data}`. */
  payload: string;
  /** pending | delivered | failed */
  status: string;
  /** Attempts since the delivery was (re)queued: the position in the retry schedule. */
  attempts: number;
  /** When a pending delivery is due; a claim moves it one lease ahead. */
  next_attempt_at: number;
  /** The claim of the dispatcher working on it; its result only lands while the claim holds. */
  claim_id: string | null;
  created_at: number;
  last_attempt_at: number | null;
  last_status_code: number | null;
  last_error: string | null;
  completed_at: number | null;
}

export interface WebhookAttemptsTable {
  attempt_id: string;
  delivery_id: string;
  webhook_id: string;
  attempted_at: number;
  status_code: number | null;
  latency_ms: number;
  error: string | null;
}

export interface CampaignsTable {
  campaign_id: string;
  tenant_id: string;
  name: string;
  /** IANA time zone; challenge days are its calendar days. */
  timezone: string;
  starts_at: number | null;
  ends_at: number | null;
  /** JSON text of the redemption configuration. */
  redemption: string;
  /** Keyed digest of the campaign secret (unique: the secret alone finds its campaign). */
  secret_digest: string;
  created_at: number;
  updated_at: number;
}

export interface ChallengesTable {
  challenge_id: string;
  campaign_id: string;
  tenant_id: string;
  reward_code: string;
  reward_title: string;
  reward_requirement: string;
  rule_type: string;
  rule_target: number;
  /** The 200×200 JPEG, base64. */
  image: string;
  created_at: number;
  updated_at: number;
}

export interface ClaimsTable {
  /** Positive integer, unique per deployment (autoincrement). */
  claim_id: Generated<number>;
  tenant_id: string;
  campaign_id: string;
  challenge_id: string;
  /** Null once the player's data was erased (migration 016): the claim and its codes stay. */
  player_id: string | null;
  reward_code: string;
  /** `XXXX-XXXX`, unique. */
  display_code: string;
  achievement_code: string;
  /** JSON text of the redemption payload as returned at claim time. */
  redemption: string;
  claimed_at: number;
  verified_at: number | null;
}

/** A tenant's alert rule (migration 014, CONTRACT §13). */
export interface AlertsTable {
  alert_id: string;
  tenant_id: string;
  name: string;
  event_type: string;
  field: string;
  /** lt | lte | gt | gte | eq | neq */
  op: string;
  /** JSON text of the value: a number or a string. */
  value: string;
  tenant_cohort_id: string | null;
  for_seconds: number;
  cooldown_seconds: number;
  created_at: number;
  updated_at: number;
}

/** One rule's state in one session; `version` makes every change a compare-and-set. */
export interface AlertStatesTable {
  session_id: string;
  alert_id: string;
  tenant_id: string;
  /** The timestamp of the first matching event of the current run; null: the condition does not hold. */
  pending_since: number | null;
  /** The open incident; null: none. */
  incident_id: string | null;
  /** The event timestamp of the open incident's last `alert.triggered` (the cooldown runs from it). */
  notified_at: number | null;
  player_id: string | null;
  version: number;
}

/** An incident: a rule triggered in a session, and how it resolved. */
export interface AlertIncidentsTable {
  incident_id: string;
  alert_id: string;
  tenant_id: string;
  session_id: string;
  player_id: string;
  tenant_cohort_id: string | null;
  triggered_at: number;
  triggered_event_id: string;
  notifications: number;
  last_notified_at: number;
  resolved_at: number | null;
  /** condition_cleared | session_ended */
  resolved_reason: string | null;
  resolved_event_id: string | null;
  created_at: number;
}

/** Uploaded screenshots (migration 015); the image bytes are in the blob store. */
export interface ScreenshotsTable {
  image_id: string;
  tenant_id: string;
  session_id: string;
  /** The `Screenshot` event's id; null while the upload is pending (blob written, event not yet). */
  event_id: string | null;
  content_type: string;
  width: number;
  height: number;
  size_bytes: number;
  created_at: number;
}

/** A player's erasure (migration 016, CONTRACT §16): pending until the job has deleted everything. */
export interface PlayerErasuresTable {
  erasure_id: string;
  tenant_id: string;
  player_id: string;
  erased_at: number;
  /** `operator`, or the client id of the tenant token that asked. */
  actor: string;
  /** pending | done */
  state: string;
  /** JSON text of what was deleted, per kind (filled as the job goes). */
  counts: string | null;
  completed_at: number | null;
  /** A process working on it holds it until then; 0 when free. */
  lease_until: number;
}

/** The sessions an erasure deleted: the job's work list (their rows elsewhere go in batches). */
export interface PlayerErasureSessionsTable {
  erasure_id: string;
  session_id: string;
}

/** What was done with a player's data, and by whom (migration 016): exports and erasures. */
export interface AuditLogTable {
  audit_id: string;
  tenant_id: string;
  /** player.export | player.erase */
  action: string;
  player_id: string;
  actor: string;
  at: number;
  /** JSON text of the counts (an erasure's once it completed). */
  counts: string | null;
  /** The erasure this row records, so its counts are filled in when it completes. */
  erasure_id: string | null;
}
