import path from 'node:path';

/** Every setting the server reads from the environment, parsed and validated once. */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | null;
  /** PostgreSQL schema to use (created if missing). Lets tests and several deployments share one database. */
  databaseSchema: string;
  sqliteSynchronous: 'FULL' | 'NORMAL';
  adminToken: string | null;
  /** Key for the keyed digests of client and campaign secrets; generated and stored in the database when unset. */
  secretKey: string | null;
  publicUrl: string | null;
  logLevel: string;
  sessionIdleTimeoutS: number;
  streamGraceS: number;
  heartbeatIntervalMs: number;
  commandSweepIntervalMs: number;
  wsMaxMessageBytes: number;
  accessTokenTtlS: number;
  deviceTokenTtlS: number;
  bodyLimitBytes: number;
  maxEventsPerBatch: number;
  maxPageSize: number;
  rateLimitTenantRps: number;
  rateLimitDeviceRps: number;
  shutdownTimeoutMs: number;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be an integer, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max)
    throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

function str(env: Env, name: string): string | null {
  const raw = env[name];
  return raw === undefined || raw.trim() === '' ? null : raw.trim();
}

export function loadConfig(env: Env = process.env): Config {
  const databaseUrl = str(env, 'DATABASE_URL');
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must be a postgres:// or postgresql:// URL');
  }
  const schema = str(env, 'LIVELINE_DATABASE_SCHEMA') ?? 'public';
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new ConfigError('LIVELINE_DATABASE_SCHEMA must match [a-z_][a-z0-9_]*');
  }
  const sync = (str(env, 'LIVELINE_SQLITE_SYNCHRONOUS') ?? 'FULL').toUpperCase();
  if (sync !== 'FULL' && sync !== 'NORMAL')
    throw new ConfigError('LIVELINE_SQLITE_SYNCHRONOUS must be FULL or NORMAL');
  const adminToken = str(env, 'LIVELINE_ADMIN_TOKEN');
  if (adminToken && adminToken.length < 16)
    throw new ConfigError('LIVELINE_ADMIN_TOKEN must be at least 16 characters');
  return {
    port: int(env, 'PORT', 8080, 0, 65535),
    host: str(env, 'HOST') ?? '0.0.0.0',
    dataDir: path.resolve(str(env, 'LIVELINE_DATA_DIR') ?? './data'),
    databaseUrl,
    databaseSchema: schema,
    sqliteSynchronous: sync,
    adminToken,
    secretKey: str(env, 'LIVELINE_SECRET_KEY'),
    publicUrl: str(env, 'LIVELINE_PUBLIC_URL'),
    logLevel: str(env, 'LOG_LEVEL') ?? 'info',
    sessionIdleTimeoutS: int(env, 'LIVELINE_SESSION_IDLE_TIMEOUT_S', 600, 1, 30 * 86400),
    streamGraceS: int(env, 'LIVELINE_STREAM_GRACE_S', 60, 1, 86400),
    heartbeatIntervalMs: int(env, 'LIVELINE_HEARTBEAT_INTERVAL_MS', 15000, 100, 600000),
    commandSweepIntervalMs: int(env, 'LIVELINE_COMMAND_SWEEP_MS', 1000, 50, 60000),
    wsMaxMessageBytes: int(env, 'LIVELINE_WS_MAX_MESSAGE_BYTES', 256 * 1024, 1024, 64 * 1024 * 1024),
    accessTokenTtlS: int(env, 'LIVELINE_ACCESS_TOKEN_TTL_S', 3600, 60, 86400),
    deviceTokenTtlS: int(env, 'LIVELINE_DEVICE_TOKEN_TTL_S', 86400, 60, 30 * 86400),
    bodyLimitBytes: int(env, 'LIVELINE_BODY_LIMIT_BYTES', 1024 * 1024, 1024, 100 * 1024 * 1024),
    maxEventsPerBatch: int(env, 'LIVELINE_MAX_EVENTS_PER_BATCH', 1000, 1, 100000),
    maxPageSize: int(env, 'LIVELINE_MAX_PAGE_SIZE', 1000, 1, 100000),
    rateLimitTenantRps: int(env, 'LIVELINE_RATE_LIMIT_TENANT_RPS', 2000, 0, 10_000_000),
    rateLimitDeviceRps: int(env, 'LIVELINE_RATE_LIMIT_DEVICE_RPS', 100, 0, 10_000_000),
    shutdownTimeoutMs: int(env, 'LIVELINE_SHUTDOWN_TIMEOUT_MS', 10000, 100, 600000),
  };
}
