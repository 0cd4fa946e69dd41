/**
 * The database as Kysely sees it. Each module owns its tables (see the module READMEs);
 * this file only declares their shapes so one query layer can be type-checked.
 * Times are Unix milliseconds in BIGINT columns; JSON is stored as text.
 */
export interface Database {
  server_keys: ServerKeysTable;
  tenants: TenantsTable;
  oauth_clients: OAuthClientsTable;
  sessions: SessionsTable;
  events: EventsTable;
  commands: CommandsTable;
  session_streams: SessionStreamsTable;
  stream_intervals: StreamIntervalsTable;
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
  /** queued | delivered | acknowledged | failed | expired */
  status: string;
  issued_at: number;
  expires_at: number;
  delivered_at: number | null;
  settled_at: number | null;
  /** JSON text of the device's error, for failed commands. */
  error: string | null;
  idempotency_key: string | null;
  request_hash: string | null;
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
