import net from 'node:net';
import path from 'node:path';
import { publicUrlProblem } from './http/public-url.ts';

/** Every setting the server reads from the environment, parsed and validated once. */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | null;
  /** Redis joins several server processes (CONTRACT §9.1); null: one process, in-memory bus. */
  redisUrl: string | null;
  /** Prefix of every Redis key and channel, so deployments (or tests) can share one Redis. */
  redisPrefix: string;
  /** How long a process's claim on its device sockets outlives the process (a dead one's sessions free up after it). */
  presenceLeaseMs: number;
  /** PostgreSQL schema to use (created if missing). Lets tests and several deployments share one database. */
  databaseSchema: string;
  sqliteSynchronous: 'FULL' | 'NORMAL';
  adminToken: string | null;
  /** Key for the keyed digests of client and campaign secrets; generated and stored in the database when unset. */
  secretKey: string | null;
  /** LIVELINE_PUBLIC_URL: the base of every URL the server hands out (else the request's Host). */
  publicUrl: string | null;
  /** NODE_ENV: `production` without LIVELINE_PUBLIC_URL gets a startup warning. */
  nodeEnv: string | null;
  logLevel: string;
  sessionIdleTimeoutS: number;
  streamGraceS: number;
  heartbeatIntervalMs: number;
  /** The live tail (CONTRACT §11): how often new events are read, keep-alive comments, slow readers. */
  tail: { pollMs: number; keepAliveMs: number; maxBufferedBytes: number };
  commandSweepIntervalMs: number;
  /** Players' erasures (CONTRACT §16): how often the job runs, and the least time before one completes. */
  erasure: { intervalMs: number; graceMs: number };
  wsMaxMessageBytes: number;
  /** Unprocessed messages of one device socket at which the server stops reading it (resumes at half). */
  wsPausePending: number;
  /** Unprocessed messages of one device socket beyond which it is closed with 1008. */
  wsMaxPending: number;
  accessTokenTtlS: number;
  deviceTokenTtlS: number;
  bodyLimitBytes: number;
  maxEventsPerBatch: number;
  /** Most live sessions a cohort-wide command goes to (CONTRACT §12); more: 409 `cohort_too_large`. */
  cohortCommandMaxSessions: number;
  /**
   * Events received more than this many days ago are deleted by the retention sweep (a tenant's own
   * `eventRetentionDays` wins); 0 keeps them forever, so nothing is ever lost silently.
   */
  eventRetentionDays: number;
  rateLimitTenantRps: number;
  rateLimitDeviceRps: number;
  /** Refused client authentications at `/oauth/token` per minute per client id and address; 0 = no limit. */
  tokenFailuresPerMinute: number;
  /**
   * Which proxies' `X-Forwarded-For` gives `request.ip` (Fastify's `trustProxy`): false (none), true
   * (any), a number of hops, or the proxies' addresses and CIDR ranges.
   */
  trustProxy: TrustProxy;
  shutdownTimeoutMs: number;
  /**
   * Load shedding (CONTRACT §16): past this event-loop delay, in milliseconds, new API requests are
   * answered 503 `overloaded` and `/readyz` turns 503 (docs/operations.md, "Load shedding"); 0: never.
   */
  maxEventLoopDelayMs: number;
  /** OpenTelemetry tracing (docs/operations.md, "Tracing"); null: off, nothing installed. */
  tracing: TracingConfig | null;
  webhooks: WebhookConfig;
  rewards: RewardsConfig;
  quotas: QuotaConfig;
  screenshots: ScreenshotConfig;
}

/** Tracing over OTLP, on when OTEL_EXPORTER_OTLP_ENDPOINT (or its traces-only variant) is set. */
export interface TracingConfig {
  /** Where spans are sent: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, else OTEL_EXPORTER_OTLP_ENDPOINT + `/v1/traces`. */
  tracesUrl: string;
  /** OTEL_SERVICE_NAME (default `liveline`). */
  serviceName: string;
}

/** Screenshots (CONTRACT §14) and where their images live (docs/configuration.md, "Screenshots"). */
export interface ScreenshotConfig {
  /** Largest image a device may upload, in bytes (5 MiB). */
  maxBytes: number;
  /** Blobs in S3 (LIVELINE_BLOB_S3_BUCKET set), else files under `<dataDir>/blobs`. */
  s3: S3BlobConfig | null;
}

export interface S3BlobConfig {
  bucket: string;
  prefix: string;
  endpoint: string | null;
  region: string;
  forcePathStyle: boolean;
  credentials: { accessKeyId: string; secretAccessKey: string } | null;
}

/**
 * Per-tenant quotas (docs/configuration.md, "Quotas"): how many of a thing may exist at once; `0`
 * turns one off. Checked in the transaction that adds the thing, so a concurrent burst cannot pass.
 */
export interface QuotaConfig {
  /** Webhook endpoints per tenant (409 `webhook_endpoint_quota_exceeded`). */
  webhookEndpoints: number;
  /** Unsettled (queued or delivered) commands per session (429 `command_queue_full`). */
  pendingCommands: number;
  /** Campaigns per tenant, ended ones included (409 `campaign_quota_exceeded`). */
  campaigns: number;
  /** Challenges per tenant, over all its campaigns (409 `challenge_quota_exceeded`). */
  challenges: number;
  /** Alert rules per tenant (409 `alert_rule_quota_exceeded`). */
  alertRules: number;
}

/** Streaming challenges (CONTRACT §7, §8). */
export interface RewardsConfig {
  /** Largest challenge import (multipart) or JSON challenge with its image, in bytes. */
  importLimitBytes: number;
  /** Failed verifications per minute per address per campaign before 429; 0 = no limit. */
  verifyFailuresPerMinute: number;
}

/** Webhook delivery settings (CONTRACT §6; docs/configuration.md). */
export interface WebhookConfig {
  /** Delays before each retry, in seconds (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h by default). */
  retryScheduleS: number[];
  /** Deliver to private, loopback and link-local addresses too (tests, trusted networks). */
  allowPrivate: boolean;
  /**
   * Not from the environment: how receiver host names are resolved, at registration and at every
   * connect (default: the system's `dns.lookup`). Tests set it to play a DNS-rebinding attacker.
   */
  resolve?: (hostname: string) => Promise<{ address: string; family: number }[]>;
  /** One attempt's whole time: connect, send, response headers and body. */
  timeoutMs: number;
  /** Attempts in flight in one process, and per endpoint. */
  concurrency: number;
  endpointConcurrency: number;
  /** Fallback poll for due deliveries (new rows of this process wake the dispatcher at once). */
  pollMs: number;
  /** How long a claimed delivery stays claimed: a process that dies mid-attempt leaves it due again after this. */
  leaseS: number;
  /** An endpoint with nothing but failures for this long is disabled. */
  disableAfterS: number;
  /** How long each process trusts its cached list of a tenant's endpoints (changes made in this process apply at once). */
  endpointCacheTtlMs: number;
  /** Finished deliveries (and their attempts) older than this are deleted. */
  retentionDays: number;
  /**
   * While ingestion's group commit is saturated, the dispatcher claims and expands nothing new for up
   * to this long after its last round (deliveries already claimed are still sent); 0: never gives way.
   */
  yieldMs: number;
}

export class ConfigError extends Error {}

export type TrustProxy = boolean | number | string[];

/** proxy-addr's names for address ranges, accepted in LIVELINE_TRUST_PROXY's list. */
const PROXY_RANGE_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

function isAddressOrRange(entry: string): boolean {
  if (PROXY_RANGE_NAMES.has(entry)) return true;
  const [address, bits, ...rest] = entry.split('/');
  const family = net.isIP(address);
  if (family === 0 || rest.length > 0) return false;
  if (bits === undefined) return true;
  return /^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
}

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

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = str(env, name);
  if (raw === null) return fallback;
  if (/^(true|1|yes)$/i.test(raw)) return true;
  if (/^(false|0|no)$/i.test(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

/** LIVELINE_TRUST_PROXY: unset or false, true, a number of hops, or a comma-separated list of addresses and CIDRs. */
function trustProxy(env: Env): TrustProxy {
  const raw = str(env, 'LIVELINE_TRUST_PROXY');
  if (raw === null || /^false$/i.test(raw)) return false;
  if (/^true$/i.test(raw)) return true;
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops > 32) throw new ConfigError(`LIVELINE_TRUST_PROXY must be at most 32 hops, got ${hops}`);
    return hops === 0 ? false : hops;
  }
  const entries = raw.split(',').map((e) => e.trim());
  const bad = entries.filter((e) => !isAddressOrRange(e));
  if (bad.length > 0 || entries.length > 100) {
    throw new ConfigError(
      'LIVELINE_TRUST_PROXY must be false, true, a number of hops, or a comma-separated list of ' +
        `addresses and CIDR ranges (or loopback, linklocal, uniquelocal); not valid: "${bad.join('", "')}"`,
    );
  }
  return entries;
}

const DEFAULT_WEBHOOK_RETRY_SCHEDULE_S = [5, 300, 1800, 7200, 18000, 36000, 36000];

function secondsList(env: Env, name: string, fallback: number[]): number[] {
  const raw = str(env, name);
  if (raw === null) return fallback;
  const parts = raw.split(',').map((p) => p.trim());
  if (parts.length > 50 || parts.some((p) => !/^\d+$/.test(p) || Number(p) > 30 * 86400)) {
    throw new ConfigError(
      `${name} must be a comma-separated list of at most 50 delays in seconds, got "${raw}"`,
    );
  }
  return parts.map(Number);
}

function loadS3BlobConfig(env: Env): S3BlobConfig | null {
  const bucket = str(env, 'LIVELINE_BLOB_S3_BUCKET');
  if (bucket === null) return null;
  const endpoint = str(env, 'LIVELINE_BLOB_S3_ENDPOINT');
  if (endpoint !== null && !/^https?:\/\/[^/]/.test(endpoint))
    throw new ConfigError(`LIVELINE_BLOB_S3_ENDPOINT must be an http(s) URL, got "${endpoint}"`);
  const accessKeyId = str(env, 'LIVELINE_BLOB_S3_ACCESS_KEY_ID');
  const secretAccessKey = str(env, 'LIVELINE_BLOB_S3_SECRET_ACCESS_KEY');
  if ((accessKeyId === null) !== (secretAccessKey === null))
    throw new ConfigError(
      'LIVELINE_BLOB_S3_ACCESS_KEY_ID and LIVELINE_BLOB_S3_SECRET_ACCESS_KEY go together (or neither: the AWS default chain)',
    );
  return {
    bucket,
    prefix: str(env, 'LIVELINE_BLOB_S3_PREFIX') ?? '',
    endpoint,
    region: str(env, 'LIVELINE_BLOB_S3_REGION') ?? str(env, 'AWS_REGION') ?? 'us-east-1',
    forcePathStyle: bool(env, 'LIVELINE_BLOB_S3_FORCE_PATH_STYLE', endpoint !== null),
    credentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey } : null,
  };
}

function loadWebhookConfig(env: Env): WebhookConfig {
  const timeoutMs = int(env, 'LIVELINE_WEBHOOK_TIMEOUT_MS', 10_000, 100, 120_000);
  const leaseS = int(env, 'LIVELINE_WEBHOOK_LEASE_S', 60, 1, 86400);
  if (leaseS * 1000 <= timeoutMs)
    throw new ConfigError('LIVELINE_WEBHOOK_LEASE_S must be longer than LIVELINE_WEBHOOK_TIMEOUT_MS');
  return {
    retryScheduleS: secondsList(env, 'LIVELINE_WEBHOOK_RETRY_SCHEDULE', DEFAULT_WEBHOOK_RETRY_SCHEDULE_S),
    allowPrivate: bool(env, 'LIVELINE_WEBHOOK_ALLOW_PRIVATE', false),
    timeoutMs,
    concurrency: int(env, 'LIVELINE_WEBHOOK_CONCURRENCY', 128, 1, 10_000),
    endpointConcurrency: int(env, 'LIVELINE_WEBHOOK_ENDPOINT_CONCURRENCY', 16, 1, 1000),
    pollMs: int(env, 'LIVELINE_WEBHOOK_POLL_MS', 1000, 10, 600_000),
    leaseS,
    disableAfterS: int(env, 'LIVELINE_WEBHOOK_DISABLE_AFTER_S', 5 * 86400, 1, 365 * 86400),
    endpointCacheTtlMs: int(env, 'LIVELINE_WEBHOOK_CACHE_TTL_MS', 5000, 0, 3_600_000),
    retentionDays: int(env, 'LIVELINE_WEBHOOK_RETENTION_DAYS', 30, 1, 3650),
    yieldMs: int(env, 'LIVELINE_WEBHOOK_YIELD_MS', 1000, 0, 60_000),
  };
}

/**
 * OTEL_EXPORTER_OTLP_ENDPOINT (the base: the exporter posts to `<base>/v1/traces`) or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL), as the OpenTelemetry specification reads them.
 * The exporter reads OTEL_EXPORTER_OTLP_HEADERS and the other OTLP settings itself.
 */
function tracing(env: Env): TracingConfig | null {
  const traces = str(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const base = str(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const name = traces ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  const url = traces ?? base;
  if (url === null) return null;
  if (!/^https?:\/\/[^/]/.test(url)) throw new ConfigError(`${name} must be an http(s) URL, got "${url}"`);
  return {
    tracesUrl: traces ?? `${url.replace(/\/+$/, '')}/v1/traces`,
    serviceName: str(env, 'OTEL_SERVICE_NAME') ?? 'liveline',
  };
}

function publicUrl(env: Env): string | null {
  const raw = str(env, 'LIVELINE_PUBLIC_URL');
  const problem = raw === null ? null : publicUrlProblem(raw);
  if (problem) throw new ConfigError(`LIVELINE_PUBLIC_URL ${problem}`);
  return raw;
}

export function loadConfig(env: Env = process.env): Config {
  const databaseUrl = str(env, 'DATABASE_URL');
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must be a postgres:// or postgresql:// URL');
  }
  const redisUrl = str(env, 'REDIS_URL');
  if (redisUrl && !/^rediss?:\/\//.test(redisUrl)) {
    throw new ConfigError('REDIS_URL must be a redis:// or rediss:// URL');
  }
  const redisPrefix = str(env, 'LIVELINE_REDIS_PREFIX') ?? 'liveline:';
  if (!/^[A-Za-z0-9:_.-]{1,64}$/.test(redisPrefix)) {
    throw new ConfigError('LIVELINE_REDIS_PREFIX must be 1 to 64 characters of A-Z a-z 0-9 : _ . -');
  }
  const schema = str(env, 'LIVELINE_DATABASE_SCHEMA') ?? 'public';
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new ConfigError('LIVELINE_DATABASE_SCHEMA must match [a-z_][a-z0-9_]*');
  }
  const sync = (str(env, 'LIVELINE_SQLITE_SYNCHRONOUS') ?? 'FULL').toUpperCase();
  if (sync !== 'FULL' && sync !== 'NORMAL')
    throw new ConfigError('LIVELINE_SQLITE_SYNCHRONOUS must be FULL or NORMAL');
  const wsPausePending = int(env, 'LIVELINE_WS_PAUSE_PENDING', 64, 1, 100_000);
  const wsMaxPending = int(env, 'LIVELINE_WS_MAX_PENDING', 1024, 1, 1_000_000);
  if (wsMaxPending < wsPausePending)
    throw new ConfigError('LIVELINE_WS_MAX_PENDING must be at least LIVELINE_WS_PAUSE_PENDING');
  const adminToken = str(env, 'LIVELINE_ADMIN_TOKEN');
  if (adminToken && adminToken.length < 16)
    throw new ConfigError('LIVELINE_ADMIN_TOKEN must be at least 16 characters');
  return {
    port: int(env, 'PORT', 8080, 0, 65535),
    host: str(env, 'HOST') ?? '0.0.0.0',
    dataDir: path.resolve(str(env, 'LIVELINE_DATA_DIR') ?? './data'),
    databaseUrl,
    databaseSchema: schema,
    redisUrl,
    redisPrefix,
    presenceLeaseMs: int(env, 'LIVELINE_PRESENCE_LEASE_MS', 9000, 300, 60_000),
    sqliteSynchronous: sync,
    adminToken,
    secretKey: str(env, 'LIVELINE_SECRET_KEY'),
    publicUrl: publicUrl(env),
    nodeEnv: str(env, 'NODE_ENV'),
    logLevel: str(env, 'LOG_LEVEL') ?? 'info',
    sessionIdleTimeoutS: int(env, 'LIVELINE_SESSION_IDLE_TIMEOUT_S', 600, 1, 30 * 86400),
    streamGraceS: int(env, 'LIVELINE_STREAM_GRACE_S', 60, 1, 86400),
    heartbeatIntervalMs: int(env, 'LIVELINE_HEARTBEAT_INTERVAL_MS', 15000, 100, 600000),
    tail: {
      pollMs: int(env, 'LIVELINE_TAIL_POLL_MS', 50, 5, 10_000),
      keepAliveMs: int(env, 'LIVELINE_TAIL_KEEPALIVE_MS', 15_000, 100, 600_000),
      maxBufferedBytes: int(env, 'LIVELINE_TAIL_MAX_BUFFER_BYTES', 4 * 1024 * 1024, 4096, 1024 * 1024 * 1024),
    },
    commandSweepIntervalMs: int(env, 'LIVELINE_COMMAND_SWEEP_MS', 1000, 50, 60000),
    // Job every 5 s, done no sooner than 10 s after the request: within the contract's 60 s.
    erasure: {
      intervalMs: int(env, 'LIVELINE_ERASURE_INTERVAL_MS', 5000, 50, 20_000),
      graceMs: int(env, 'LIVELINE_ERASURE_GRACE_MS', 10_000, 0, 30_000),
    },
    wsMaxMessageBytes: int(env, 'LIVELINE_WS_MAX_MESSAGE_BYTES', 256 * 1024, 1024, 64 * 1024 * 1024),
    wsPausePending,
    wsMaxPending,
    accessTokenTtlS: int(env, 'LIVELINE_ACCESS_TOKEN_TTL_S', 3600, 60, 86400),
    deviceTokenTtlS: int(env, 'LIVELINE_DEVICE_TOKEN_TTL_S', 86400, 60, 30 * 86400),
    bodyLimitBytes: int(env, 'LIVELINE_BODY_LIMIT_BYTES', 1024 * 1024, 1024, 100 * 1024 * 1024),
    maxEventsPerBatch: int(env, 'LIVELINE_MAX_EVENTS_PER_BATCH', 1000, 1, 100000),
    cohortCommandMaxSessions: int(env, 'LIVELINE_COHORT_COMMAND_MAX_SESSIONS', 10_000, 1, 10_000),
    eventRetentionDays: int(env, 'LIVELINE_EVENT_RETENTION_DAYS', 0, 0, 36500),
    rateLimitTenantRps: int(env, 'LIVELINE_RATE_LIMIT_TENANT_RPS', 2000, 0, 10_000_000),
    rateLimitDeviceRps: int(env, 'LIVELINE_RATE_LIMIT_DEVICE_RPS', 100, 0, 10_000_000),
    tokenFailuresPerMinute: int(env, 'LIVELINE_TOKEN_FAILURES_PER_MINUTE', 10, 0, 1_000_000),
    trustProxy: trustProxy(env),
    shutdownTimeoutMs: int(env, 'LIVELINE_SHUTDOWN_TIMEOUT_MS', 10000, 100, 600000),
    maxEventLoopDelayMs: int(env, 'LIVELINE_MAX_EVENT_LOOP_DELAY_MS', 1000, 0, 600_000),
    tracing: tracing(env),
    webhooks: loadWebhookConfig(env),
    rewards: {
      importLimitBytes: int(env, 'LIVELINE_IMPORT_LIMIT_BYTES', 10 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
      verifyFailuresPerMinute: int(env, 'LIVELINE_VERIFY_FAILURES_PER_MINUTE', 10, 0, 1_000_000),
    },
    quotas: {
      webhookEndpoints: int(env, 'LIVELINE_QUOTA_WEBHOOK_ENDPOINTS', 20, 0, 100_000),
      pendingCommands: int(env, 'LIVELINE_QUOTA_PENDING_COMMANDS', 100, 0, 1_000_000),
      campaigns: int(env, 'LIVELINE_QUOTA_CAMPAIGNS', 1000, 0, 10_000_000),
      challenges: int(env, 'LIVELINE_QUOTA_CHALLENGES', 10_000, 0, 100_000_000),
      alertRules: int(env, 'LIVELINE_QUOTA_ALERT_RULES', 100, 0, 10_000),
    },
    screenshots: {
      maxBytes: int(env, 'LIVELINE_SCREENSHOT_MAX_BYTES', 5 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
      s3: loadS3BlobConfig(env),
    },
  };
}
