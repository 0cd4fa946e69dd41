import type { FastifyBaseLogger } from 'fastify';
import type { Logger } from 'pino';
import { type BlobStore, openBlobStore } from './blobs/index.ts';
import { type Bus, type BusDeployment, connectBus, type Presence, type RedisLink } from './bus/index.ts';
import type { Clock } from './clock.ts';
import type { Config } from './config.ts';
import { createMetrics, type Metrics } from './http/metrics.ts';
import { publicUrlWarning } from './http/public-url.ts';
import type { Job, Worker } from './jobs.ts';
import { jobsOf } from './jobs.ts';
import { failureWindow } from './limits/index.ts';
import { AlertsService } from './modules/alerts/index.ts';
import { type AuthService, createAuth, KeyRing, type OperatorToken } from './modules/auth/index.ts';
import { CommandBatches, CommandDelivery, CommandsService } from './modules/commands/index.ts';
import { EventRetention, EventsService } from './modules/events/index.ts';
import { PlayersService } from './modules/players/index.ts';
import { RealtimeHub } from './modules/realtime/index.ts';
import { createRewards, type Rewards } from './modules/rewards/index.ts';
import { ScreenshotsService } from './modules/screenshots/index.ts';
import { LiveSessions, SessionsService } from './modules/sessions/index.ts';
import { StreamsService } from './modules/streams/index.ts';
import { TailHub, TailStore } from './modules/tail/index.ts';
import { createWebhooks, type WebhooksService } from './modules/webhooks/index.ts';
import type { Outbox } from './outbox.ts';
import { Signals } from './signals.ts';
import { dataDirWarnings, openStorage, type Storage } from './storage/index.ts';
import { wire } from './wire.ts';

/** Every service of one server process, built once, in dependency order. */
export interface Services {
  config: Config;
  clock: Clock;
  logger: Logger;
  storage: Storage;
  metrics: Metrics;
  signals: Signals;
  bus: Bus;
  presence: Presence;
  /** The link to Redis that joins this process to the others; null when it runs alone. */
  redis: RedisLink | null;
  auth: AuthService;
  /** The operator's admin token (the auth service's), printed once when this start generated it. */
  operator: OperatorToken;
  /** Key of the keyed digests of client and campaign secrets. */
  digestKey: Buffer;
  events: EventsService;
  /** The event retention sweep (LIVELINE_EVENT_RETENTION_DAYS and each tenant's own). */
  retention: EventRetention;
  sessions: SessionsService;
  /** Live sessions remembered for the command path (no read per command). */
  liveSessions: LiveSessions;
  streams: StreamsService;
  delivery: CommandDelivery;
  commands: CommandsService;
  /** Cohort-wide commands (CONTRACT §12), issued through `commands`. */
  batches: CommandBatches;
  /** Alert rules (CONTRACT §13), evaluated in the ingestion transaction. */
  alerts: AlertsService;
  hub: RealtimeHub;
  /** The live tail's readers on this process (CONTRACT §11). */
  tail: TailHub;
  webhooks: WebhooksService;
  /** Campaigns, challenges, progress, claims and verification. */
  rewards: Rewards;
  /** Where screenshots' images live: files under `<dataDir>/blobs`, or S3 (LIVELINE_BLOB_S3_BUCKET). */
  blobs: BlobStore;
  /** Device screenshots (CONTRACT §14): the image in `blobs`, its Screenshot event through `events`. */
  screenshots: ScreenshotsService;
  /** Players' data (CONTRACT §16): their sessions, export, erasure and the audit log. */
  players: PlayersService;
  /** Where modules write webhook messages, in the transaction of the fact they report. */
  outbox: Outbox;
  /** Periodic jobs and self-paced workers, started with the server (see jobs.ts). */
  jobs: Job[];
  workers: Worker[];
  /** Releases what the services hold (bus, presence, storage). */
  close(): Promise<void>;
}

/**
 * The dependency graph of the server, in one place: storage, then each module's service with the
 * few services it uses, then `wire()` connects their hooks and signals. No constructor registers
 * anything with another service.
 */
export async function compose(config: Config, clock: Clock, logger: Logger): Promise<Services> {
  const storage = await openStorage(config);
  // The embedded store keeps the signing keys (and the admin token) in the data directory.
  if (!config.databaseUrl) for (const warning of dataDirWarnings(config.dataDir)) logger.warn(warning);
  const hostTrust = publicUrlWarning(config);
  if (hostTrust) logger.warn(hostTrust);
  let deployment: BusDeployment | undefined;
  try {
    const log = logger as FastifyBaseLogger;
    const keys = await KeyRing.open(storage, config.secretKey, clock);
    const metrics = createMetrics();
    const signals = new Signals((err, signal) => logger.error({ err, signal }, 'signal handler failed'));
    deployment = await connectBus({
      redisUrl: config.redisUrl,
      redisPrefix: config.redisPrefix,
      presenceLeaseMs: config.presenceLeaseMs,
      log,
      registry: metrics.registry,
    });
    const { bus, presence } = deployment;
    const joined = deployment;

    const events = new EventsService(storage, clock, metrics, {
      maxEventsPerBatch: config.maxEventsPerBatch,
    });
    const sessions = new SessionsService(storage, clock, events, signals);
    const liveSessions = new LiveSessions(sessions, clock);
    const streams = new StreamsService(storage, clock, sessions, events);
    const delivery = new CommandDelivery(storage, clock, bus, presence, log, {
      remoteWaitMs: 2000,
      // Several processes with a queue quota: each counts the others' commands (`CommandQueues`).
      announceEveryMs: config.redisUrl !== null && config.quotas.pendingCommands > 0 ? 100 : 0,
    });
    const commands = new CommandsService(storage, clock, delivery, signals, {
      queue: { limit: config.quotas.pendingCommands, shared: config.redisUrl !== null },
    });
    const batches = new CommandBatches(storage, clock, commands, sessions, log, {
      maxSessions: config.cohortCommandMaxSessions,
      chunk: 500,
    });
    const hub = new RealtimeHub(bus, presence, clock, log, {
      heartbeatIntervalMs: config.heartbeatIntervalMs,
    });
    const tail = new TailHub(
      new TailStore(storage.db, storage.visibleOrder),
      clock,
      log,
      {
        ...config.tail,
        backlogMs: 24 * 3600_000,
        pageSize: 1000,
      },
      metrics.tail,
    );
    const auth = await createAuth({ storage, clock, config, keys });
    const retention = new EventRetention(
      storage,
      clock,
      auth,
      sessions,
      { defaultDays: config.eventRetentionDays },
      metrics.registry,
    );
    const webhooks = createWebhooks({
      storage,
      clock,
      config,
      logger,
      metrics,
      tenants: auth,
    });
    const alerts = new AlertsService(
      storage,
      clock,
      webhooks.outbox,
      {
        sessionIn: async (db, tenantId, sessionId) => {
          const row = await sessions.findIn(db, tenantId, sessionId);
          return row && { playerId: row.player_id, live: row.status === 'live' };
        },
      },
      { quota: config.quotas.alertRules, cacheTtlMs: config.webhooks.endpointCacheTtlMs },
    );
    const rewards = createRewards({
      storage,
      clock,
      config,
      digestKey: keys.digestKey,
      outbox: webhooks.outbox,
      streams,
      tenants: auth,
      verifyFailures: failureWindow(joined.redis, clock, {
        name: 'verify',
        limit: config.rewards.verifyFailuresPerMinute,
        windowMs: 60_000,
        log,
      }),
    });

    const blobs = openBlobStore({ dataDir: config.dataDir, s3: config.screenshots.s3 });
    const screenshots = new ScreenshotsService(storage, clock, blobs, events, logger, {
      maxBytes: config.screenshots.maxBytes,
    });

    const players = new PlayersService(
      storage,
      clock,
      webhooks.outbox,
      {
        sessions: {
          playerPage: async (tenantId, playerId, page) => {
            const { rows, ...meta } = await sessions.list({ tenantId, playerId }, page);
            return { items: await sessions.views(rows), ...meta };
          },
          erasePlayerIn: (trx, tenantId, playerId, upTo, limit) =>
            sessions.erasePlayerIn(trx, tenantId, playerId, upTo, limit),
        },
        events,
        commands: {
          commandPage: async (sessionId, page) => {
            const { commands: items, nextCursor } = await commands.list(sessionId, page);
            return { items, nextCursor };
          },
        },
        screenshots,
        claims: rewards.claims,
        tokens: auth,
      },
      logger,
      config.erasure,
    );

    const services: Services = {
      config,
      clock,
      logger,
      storage,
      metrics,
      signals,
      bus,
      presence,
      redis: joined.redis,
      auth,
      operator: auth.operator,
      digestKey: keys.digestKey,
      events,
      retention,
      sessions,
      liveSessions,
      streams,
      delivery,
      commands,
      batches,
      alerts,
      hub,
      tail,
      webhooks,
      rewards,
      blobs,
      screenshots,
      players,
      outbox: webhooks.outbox,
      jobs: [],
      workers: webhooks.workers(),
      async close() {
        tail.close();
        // What was noted in memory to be written in batches (contact, delivery times) is written now.
        await sessions.flushContacts().catch(() => {});
        await delivery.flushMarks().catch(() => {});
        await joined.close();
        blobs.close?.();
        await storage.close();
      },
    };
    wire(services);
    services.jobs = jobsOf(services);
    return services;
  } catch (err) {
    await deployment?.close();
    await storage.close();
    throw err;
  }
}
