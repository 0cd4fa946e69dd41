import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Clock } from '../../clock.ts';
import type { QuotaConfig, WebhookConfig } from '../../config.ts';
import { problems } from '../../http/problem.ts';
import { uuidv7 } from '../../ids.ts';
import type { Job, Worker } from '../../jobs.ts';
import { enforceQuota } from '../../limits/quota.ts';
import { type Database, inSnapshot, type Storage } from '../../storage/index.ts';
import { assertPublicHost, BlockedAddressError } from './address-guard.ts';
import { Dispatcher } from './dispatcher.ts';
import { EndpointCache } from './endpoint-cache.ts';
import { eraseUnsent } from './erase.ts';
import { createWebhookMetrics, type WebhookMetrics } from './metrics.ts';
import { endpointDisabled } from './operational.ts';
import { WebhookOutbox } from './outbox.ts';
import { retentionJob } from './retention.ts';
import { MAX_URL_LENGTH } from './schemas.ts';
import { WebhookSender } from './sender.ts';
import { generateSecret } from './signing.ts';
import * as store from './store.ts';

/** What webhooks needs to know of tenants (the auth module has them): the operator routes name one. */
export interface TenantDirectory {
  tenantExists(tenantId: string): Promise<boolean>;
}

/** How long the secret before a rotation keeps signing (CONTRACT §6: 24 h, both signatures sent). */
export const ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000;

export interface WebhookInput {
  url: string;
  description?: string | null;
  eventTypes?: string[] | null;
  types?: string[] | null;
  /** `session.event` messages in batches of up to 100 per request (`session.events`). */
  batch?: boolean;
}

export interface WebhookPatch extends Partial<WebhookInput> {
  enabled?: boolean;
}

const json = (list: string[] | null | undefined) => (list ? JSON.stringify([...new Set(list)]) : null);
const parse = (text: string | null) => (text === null ? null : (JSON.parse(text) as string[]));

function view(row: store.EndpointRow) {
  return {
    webhookId: row.webhook_id,
    url: row.url,
    description: row.description,
    eventTypes: parse(row.event_types),
    types: parse(row.types),
    batch: row.batch === 1,
    enabled: row.enabled === 1,
    disabledReason: row.disabled_reason as 'manual' | 'failing' | null,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function deliveryView(row: store.DeliveryRow, attempts: store.AttemptRow[]) {
  return {
    deliveryId: row.delivery_id,
    webhookId: row.webhook_id,
    type: row.type,
    eventType: row.event_type,
    status: row.status as 'pending' | 'delivered' | 'failed',
    createdAt: row.created_at,
    nextAttemptAt: row.status === 'pending' ? row.next_attempt_at : null,
    completedAt: row.completed_at,
    lastError: row.last_error,
    payload: JSON.parse(row.payload) as unknown,
    attempts: attempts.map((a) => ({
      attemptedAt: a.attempted_at,
      statusCode: a.status_code,
      latencyMs: a.latency_ms,
      error: a.error,
    })),
  };
}

export interface WebhooksDeps {
  storage: Storage;
  clock: Clock;
  config: { webhooks: WebhookConfig; quotas: Pick<QuotaConfig, 'webhookEndpoints'> };
  logger: Logger;
  /** The server's registry: the webhook metrics join it. */
  metrics: { registry: Registry };
  tenants: TenantDirectory;
}

/**
 * Builds the webhooks module: its service, outbox, dispatcher (a `Worker`) and retention job. Nothing
 * starts here; the caller runs `workers()` and `jobs()`, and calls `outbox.recordStoredEvents` from
 * the events module's ingestion transaction.
 */
export function createWebhooks(deps: WebhooksDeps): WebhooksService {
  const { storage, clock, logger, tenants } = deps;
  const config = deps.config.webhooks;
  const cache = new EndpointCache(config.endpointCacheTtlMs);
  const metrics = createWebhookMetrics(
    deps.metrics.registry,
    () => store.outboxStats(storage.db),
    () => clock.now(),
  );
  const sender = new WebhookSender({
    allowPrivate: config.allowPrivate,
    timeoutMs: config.timeoutMs,
    connectionsPerOrigin: config.endpointConcurrency,
    resolve: config.resolve,
    // The tenant's delivery log says "not allowed"; the address it resolved to is for the operator.
    onRefused: (refusal) =>
      logger.warn(refusal.logDetail, 'webhook attempt refused: the target resolves to a non-public address'),
  });
  // Endpoints the dispatcher disabled: the outbox stops writing for them at once.
  const disabled = (tenantId: string) => service.endpointsChanged(tenantId);
  const dispatcher = new Dispatcher(
    storage,
    clock,
    config,
    sender,
    metrics,
    logger,
    disabled,
    (trx, messages) => outbox.enqueueOperational(trx, messages),
  );
  const outbox = new WebhookOutbox(
    storage,
    cache,
    () => clock.now(),
    () => dispatcher.nudge(),
  );
  const retention = retentionJob(storage, clock, config, logger);
  const service = new WebhooksService({
    storage,
    clock,
    logger,
    config,
    maxEndpoints: deps.config.quotas.webhookEndpoints,
    tenants,
    cache,
    outbox,
    dispatcher,
    retention,
    metrics,
  });
  return service;
}

interface WebhooksParts {
  storage: Storage;
  clock: Clock;
  logger: Logger;
  config: WebhookConfig;
  /** Endpoints per tenant (`LIVELINE_QUOTA_WEBHOOK_ENDPOINTS`; 0: no quota). */
  maxEndpoints: number;
  tenants: TenantDirectory;
  cache: EndpointCache;
  outbox: WebhookOutbox;
  dispatcher: Dispatcher;
  retention: Job;
  metrics: WebhookMetrics;
}

/** Webhook endpoints, their outbox and dispatcher, and the delivery log (CONTRACT §6). */
export class WebhooksService {
  /** Where other modules write their messages (`Outbox`), and where stored events are recorded. */
  readonly outbox: WebhookOutbox;
  private readonly storage: Storage;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly config: WebhookConfig;
  private readonly maxEndpoints: number;
  private readonly tenants: TenantDirectory;
  private readonly cache: EndpointCache;
  private readonly dispatcher: Dispatcher;
  private readonly retention: Job;
  private readonly metrics: WebhookMetrics;
  private readonly changeListeners: ((tenantId: string) => void)[] = [];

  constructor(parts: WebhooksParts) {
    this.storage = parts.storage;
    this.clock = parts.clock;
    this.logger = parts.logger;
    this.config = parts.config;
    this.maxEndpoints = parts.maxEndpoints;
    this.tenants = parts.tenants;
    this.cache = parts.cache;
    this.outbox = parts.outbox;
    this.dispatcher = parts.dispatcher;
    this.retention = parts.retention;
    this.metrics = parts.metrics;
  }

  /**
   * Erasure (the players module): the tenant's deliveries not yet sent, and fan-out messages, whose
   * body names one of `needles`; at most about `limit` per call; how many went (`erase.ts`).
   */
  eraseUnsent(tenantId: string, needles: string[], limit: number): Promise<number> {
    return eraseUnsent(this.storage.db, tenantId, needles, limit);
  }

  /** The dispatcher gives way to ingestion while `load` (0 to 1) says it is saturated (`Dispatcher.giveWayTo`). */
  giveWayTo(load: () => number) {
    this.dispatcher.giveWayTo(load);
  }

  /** The dispatcher, which sends due deliveries: start it with the process, stop it before storage closes. */
  workers(): Worker[] {
    return [this.dispatcher];
  }

  /** Retention of finished deliveries. */
  jobs(): Job[] {
    return [this.retention];
  }

  /** Called after this process changed a tenant's endpoints (the wiring tells the other processes). */
  onEndpointsChanged(listener: (tenantId: string) => void) {
    this.changeListeners.push(listener);
  }

  /** A tenant's endpoints changed here: caches forget them, the dispatcher re-reads, listeners hear. */
  endpointsChanged(tenantId: string) {
    this.changedElsewhere(tenantId);
    for (const listener of this.changeListeners) listener(tenantId);
  }

  /** Another process changed a tenant's endpoints (`null` when every tenant's may have changed). */
  changedElsewhere(tenantId: string | null) {
    this.cache.invalidate(tenantId);
    this.dispatcher.endpointsChanged();
  }

  /** The operator routes' tenant: 404 when there is none. */
  async requireTenant(tenantId: string): Promise<string> {
    if (!(await this.tenants.tenantExists(tenantId))) throw problems.notFound('tenant');
    return tenantId;
  }

  /** Refuses URLs that are not http(s), carry credentials, or reach a non-public address. */
  private async checkUrl(raw: string): Promise<string> {
    const invalid = (message: string) =>
      problems.validation(`The webhook URL ${message}.`, [{ path: 'url', message }]);
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw invalid('is not a valid absolute URL');
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw invalid('must use https: or http:');
    if (url.username || url.password) throw invalid('must not contain credentials');
    if (url.href.length > MAX_URL_LENGTH) throw invalid(`must be at most ${MAX_URL_LENGTH} characters`);
    if (!this.config.allowPrivate) {
      try {
        await assertPublicHost(url.hostname, this.config.resolve);
      } catch (err) {
        if (err instanceof BlockedAddressError) {
          // The tenant hears "not allowed"; the address it resolved to goes to the server log only.
          this.logger.warn(err.logDetail, 'webhook URL refused: it resolves to a non-public address');
          throw invalid('is not allowed: webhooks may reach public addresses only');
        }
        throw invalid(`has a host that does not resolve (${url.hostname})`);
      }
    }
    return url.href;
  }

  private async requireEndpoint(tenantId: string, webhookId: string) {
    const row = await store.findEndpoint(this.storage.db, tenantId, webhookId);
    if (!row) throw problems.notFound('webhook');
    return row;
  }

  async create(tenantId: string, input: WebhookInput) {
    const url = await this.checkUrl(input.url);
    const now = this.clock.now();
    const row: store.EndpointRow = {
      webhook_id: uuidv7(),
      tenant_id: tenantId,
      url,
      description: input.description ?? null,
      event_types: json(input.eventTypes),
      types: json(input.types),
      enabled: 1,
      disabled_reason: null,
      secret: generateSecret(),
      previous_secret: null,
      previous_secret_until: null,
      failing_since: null,
      outage_since: null,
      batch: input.batch === true ? 1 : 0,
      created_at: now,
      updated_at: now,
    };
    // Counted in the inserting transaction: a concurrent burst cannot pass the quota.
    await this.storage.db.transaction().execute(async (trx) => {
      await enforceQuota(this.storage, trx, {
        tenantId,
        limit: this.maxEndpoints,
        adding: 1,
        count: (db) => store.countEndpoints(db, tenantId),
        refuse: () =>
          problems.quotaExceeded('webhook_endpoint_quota_exceeded', 'webhook endpoints', this.maxEndpoints),
      });
      await store.insertEndpoint(trx, row);
    });
    this.endpointsChanged(tenantId);
    return { ...view(row), secret: row.secret };
  }

  async list(tenantId: string, limit: number) {
    const { rows, totalCount } = await store.listEndpoints(this.storage.db, tenantId, limit);
    return { webhooks: rows.map(view), totalCount };
  }

  async get(tenantId: string, webhookId: string) {
    return view(await this.requireEndpoint(tenantId, webhookId));
  }

  async update(tenantId: string, webhookId: string, patch: WebhookPatch) {
    await this.requireEndpoint(tenantId, webhookId);
    const changes: Partial<store.EndpointRow> = {};
    if (patch.url !== undefined) changes.url = await this.checkUrl(patch.url);
    if (patch.description !== undefined) changes.description = patch.description;
    if (patch.eventTypes !== undefined) changes.event_types = json(patch.eventTypes);
    if (patch.types !== undefined) changes.types = json(patch.types);
    if (patch.batch !== undefined) changes.batch = patch.batch ? 1 : 0;
    const { row, disabled } = await this.storage.db.transaction().execute(async (trx) => {
      const now = this.clock.now();
      // Read again in the transaction (locked where rows lock): whether this PATCH disables the
      // endpoint must not race the dispatcher disabling it for failing (one message, one reason).
      const current = await store.findEndpoint(trx, tenantId, webhookId, this.storage.skipLocked);
      if (!current) return { row: undefined, disabled: false };
      const set: Partial<store.EndpointRow> = { ...changes, updated_at: now };
      // Re-enabling clears `failing_since` (a fresh disable-after period) but keeps `outage_since`:
      // the first success afterwards reports the recovery.
      if (patch.enabled === true && current.enabled !== 1) {
        Object.assign(set, { enabled: 1, disabled_reason: null, failing_since: null });
      }
      const disabling = patch.enabled === false && current.enabled === 1;
      if (disabling) Object.assign(set, { enabled: 0, disabled_reason: 'manual' });
      const updated = await store.updateEndpoint(trx, tenantId, webhookId, set);
      if (updated && disabling) {
        await store.failPending(trx, webhookId, 'endpoint disabled', now);
        // Written after the update: the endpoint is no longer among the enabled ones it goes to.
        await this.outbox.enqueueOperational(trx, [
          endpointDisabled({ tenantId, webhookId, url: updated.url }, 'manual', now),
        ]);
      }
      return { row: updated, disabled: updated !== undefined && disabling };
    });
    if (!row) throw problems.notFound('webhook');
    if (disabled) {
      this.metrics.endpointsDisabled.inc({ reason: 'manual' });
      this.logger.info({ webhookId, tenantId }, 'webhook endpoint disabled by request');
    }
    this.endpointsChanged(tenantId);
    return view(row);
  }

  async remove(tenantId: string, webhookId: string) {
    const removed = await this.storage.db
      .transaction()
      .execute((trx) => store.deleteEndpoint(trx, tenantId, webhookId));
    if (!removed) throw problems.notFound('webhook');
    this.endpointsChanged(tenantId);
  }

  /** A new secret; the current one keeps signing (second signature) for 24 h. */
  async rotateSecret(tenantId: string, webhookId: string) {
    const current = await this.requireEndpoint(tenantId, webhookId);
    const now = this.clock.now();
    const secret = generateSecret();
    const previousSecretExpiresAt = now + ROTATION_OVERLAP_MS;
    const row = await store.updateEndpoint(this.storage.db, tenantId, webhookId, {
      secret,
      previous_secret: current.secret,
      previous_secret_until: previousSecretExpiresAt,
      updated_at: now,
    });
    if (!row) throw problems.notFound('webhook');
    return { ...view(row), secret, previousSecretExpiresAt };
  }

  /** Queues a `webhook.test` delivery for this endpoint, whatever its filters. */
  async sendTest(tenantId: string, webhookId: string) {
    const endpoint = await this.requireEndpoint(tenantId, webhookId);
    if (endpoint.enabled !== 1) {
      throw problems.webhookDisabled('to send a test');
    }
    const deliveryId = await this.storage.db.transaction().execute((trx) =>
      this.outbox.enqueueTest(trx, tenantId, webhookId, {
        webhookId,
        message: 'A test delivery from liveline.',
      }),
    );
    return this.delivery(tenantId, webhookId, deliveryId);
  }

  async deliveries(
    tenantId: string,
    webhookId: string,
    query: { status?: string; after?: string; limit: number },
  ) {
    await this.requireEndpoint(tenantId, webhookId);
    // One snapshot: each delivery once (its status ranges are read one after the other) and with the
    // attempts its row counts.
    return inSnapshot(this.storage, async (db) => {
      const rows = await store.listDeliveries(db, webhookId, { ...query, limit: query.limit + 1 });
      const hasMore = rows.length > query.limit;
      const page = hasMore ? rows.slice(0, query.limit) : rows;
      return {
        deliveries: await withAttempts(db, page),
        nextCursor: hasMore ? page[page.length - 1].delivery_id : null,
        hasMore,
      };
    });
  }

  async delivery(tenantId: string, webhookId: string, deliveryId: string) {
    await this.requireEndpoint(tenantId, webhookId);
    const found = await inSnapshot(this.storage, async (db) => {
      const row = await store.findDelivery(db, webhookId, deliveryId);
      return row ? (await withAttempts(db, [row]))[0] : null;
    });
    if (!found) throw problems.notFound('delivery');
    return found;
  }

  /** Sends a delivery again, now, with the same webhook-id and a fresh retry schedule. */
  async retry(tenantId: string, webhookId: string, deliveryId: string) {
    const endpoint = await this.requireEndpoint(tenantId, webhookId);
    if (endpoint.enabled !== 1) {
      throw problems.webhookDisabled('before retrying');
    }
    const n = await store.requeue(this.storage.db, webhookId, { deliveryId }, this.clock.now());
    if (n === 0) throw problems.notFound('delivery');
    this.dispatcher.nudge();
    return this.delivery(tenantId, webhookId, deliveryId);
  }

  /** Sends again every delivery created at or after `since` (each with its own webhook-id, as before). */
  async replay(tenantId: string, webhookId: string, since: number) {
    const endpoint = await this.requireEndpoint(tenantId, webhookId);
    if (endpoint.enabled !== 1) {
      throw problems.webhookDisabled('before replaying');
    }
    const replayed = await store.requeue(
      this.storage.db,
      webhookId,
      { fromDeliveryId: store.uuidv7Floor(since) },
      this.clock.now(),
      { lockInOrder: this.storage.skipLocked },
    );
    if (replayed > 0) this.dispatcher.nudge();
    return { replayed };
  }
}

/** Deliveries with their attempts, read through `db` (the caller's snapshot). */
async function withAttempts(db: Kysely<Database>, rows: store.DeliveryRow[]) {
  const attempts = await store.attemptsOf(
    db,
    rows.map((r) => r.delivery_id),
  );
  const byDelivery = new Map<string, store.AttemptRow[]>();
  for (const a of attempts) {
    const list = byDelivery.get(a.delivery_id);
    if (list) list.push(a);
    else byDelivery.set(a.delivery_id, [a]);
  }
  return rows.map((r) => deliveryView(r, byDelivery.get(r.delivery_id) ?? []));
}
