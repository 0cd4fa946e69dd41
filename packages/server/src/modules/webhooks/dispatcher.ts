import { setMaxListeners } from 'node:events';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { Batcher } from '../../batcher.ts';
import type { Clock } from '../../clock.ts';
import type { WebhookConfig } from '../../config.ts';
import { uuidv7 } from '../../ids.ts';
import type { Worker } from '../../jobs.ts';
import type { OutboxMessage } from '../../outbox.ts';
import type { Database, Storage } from '../../storage/index.ts';
import { expandFanout, FIRST_EXPANSION_ROWS, rowsToTake } from './fanout.ts';
import type { WebhookMetrics } from './metrics.ts';
import { endpointDisabled, endpointRecovered } from './operational.ts';
import { afterFailure } from './schedule.ts';
import type { AttemptOutcome, WebhookSender } from './sender.ts';
import { webhookHeaders } from './signing.ts';
import * as store from './store.ts';

interface Settled {
  delivery: store.DeliveryRow;
  /** null: not attempted (the endpoint is gone or disabled). */
  outcome: AttemptOutcome | null;
  at: number;
}

/** How many candidates one claim query reads per free place (some may belong to full endpoints). */
const CANDIDATES_PER_SLOT = 2;
const MAX_CANDIDATES = 256;
/** How many endpoints one claim looks at one by one when the oldest due rows belong to full ones. */
const PROBES_PER_CLAIM = 32;
/** How long the list of enabled endpoints (for those looks) is reused. */
const ENDPOINT_LIST_TTL_MS = 2000;
/** After new rows were written, how long to keep looking for them if the first look saw none (their
 * transaction had not committed yet). */
const EXPECT_WINDOW_MS = 2000;
const EXPECT_RETRY_MS = 20;
/** While every endpoint's queue is full, how often fan-out rows are expanded (see `shouldExpand`). */
const SATURATED_EXPANSION_MS = 1000;
/** What an expansion that found no fan-out row took (`expandFanout`'s answer for none). */
const NO_FANOUT = { written: 0, more: false, rows: 0, messages: 0 };
/** Most claimed deliveries a process holds per in-flight slot (queued behind the attempts in flight). */
const MAX_BUFFER_FACTOR = 4;
/**
 * Ingestion's load (`EventsService.ingestionLoad`: the share of the recent time every writer slot held
 * a group) at which the dispatcher gives way (see `holdOff`): half. A flood on PostgreSQL (32 devices
 * posting 100-event batches, four slots) kept every slot busy only 55–77 % of the time — requests
 * waited for a slot 30–56 % of it — and read 0.63–0.83, so at 0.9 the dispatcher never gave way and
 * one endpoint cost ingestion a third of its throughput. One SQLite writer busy half the time makes
 * every other request wait for a group; a load the store keeps up with reads near 0.
 */
const SATURATED_LOAD = 0.5;
/** While giving way, how often the dispatcher looks again. */
const GIVE_WAY_CHECK_MS = 50;

interface Held {
  delivery: store.DeliveryRow;
  endpoint: store.EndpointRow | undefined;
  claimedAt: number;
}

/** Counts per key that drop out at zero. */
class Counts extends Map<string, number> {
  add(key: string, n: number) {
    const v = (this.get(key) ?? 0) + n;
    if (v > 0) this.set(key, v);
    else this.delete(key);
  }
  of(key: string) {
    return this.get(key) ?? 0;
  }
}

const claimOf = (h: Held) => ({ deliveryId: h.delivery.delivery_id, claimId: h.delivery.claim_id! });

/**
 * Sends due deliveries. Runs in every process: a delivery is claimed (a conditional update that
 * moves it one lease ahead under a claim id, with `FOR UPDATE SKIP LOCKED` where the store has it)
 * before it is sent, so two processes never send it at once; a claim whose process died expires
 * with its lease and the delivery is due again.
 *
 * Claimed deliveries wait in a queue per endpoint; at most `endpointConcurrency` attempts per
 * endpoint and `concurrency` overall are in flight, so a receiver that hangs holds its own slots,
 * never another endpoint's. A claim takes a few deliveries per slot at once (so one query serves
 * many attempts), no more than the lease allows to wait behind attempts that time out.
 *
 * A `Worker` (src/jobs.ts): it paces itself (polls, and is nudged by new rows), and whoever runs the
 * process starts it and stops it before storage closes.
 */
export class Dispatcher implements Worker {
  readonly name = 'webhooks.dispatcher';
  private readonly queues = new Map<string, Held[]>();
  /** Claimed and not settled (queued or in flight), overall and per endpoint. */
  private held = 0;
  private readonly heldPer = new Counts();
  private flying = 0;
  private readonly flyingPer = new Counts();
  private readonly tasks = new Set<Promise<void>>();
  private readonly maxHeldPerEndpoint: number;
  private readonly maxHeld: number;
  private stopped = true;
  private round: Promise<void> | null = null;
  private again = false;
  /** The last claim left due rows behind for want of room overall: claim again as places free up. */
  private backlog = false;
  /** Endpoints whose due rows the last claims left behind because their queue was full. */
  private readonly backlogged = new Set<string>();
  private probeCursor = 0;
  private lastExpansion = 0;
  /** Fan-out rows the next expansion takes (`fanout.ts` `rowsToTake`). */
  private expansionRows = FIRST_EXPANSION_ROWS;
  private endpointIds: { ids: string[]; at: number } | null = null;
  private expectUntil = 0;
  private pollTimer: NodeJS.Timeout | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private giveWayTimer: NodeJS.Timeout | null = null;
  /** Ingestion's load, 0 to 1 (set by the wiring: `giveWayTo`). */
  private ingestionLoad: () => number = () => 0;
  /** When the last round (claim and expansion) began. */
  private lastRound = Number.NEGATIVE_INFINITY;
  private readonly stop$ = new AbortController();
  private readonly settle: Batcher<Settled, undefined>;

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly config: WebhookConfig,
    private readonly sender: WebhookSender,
    private readonly metrics: WebhookMetrics,
    private readonly logger: Logger,
    /** Told when endpoints were disabled, so the outbox stops writing for them. */
    private readonly onDisabled: (tenantId: string, webhookId: string) => void,
    /** Writes operational messages (`operational.ts`) in the results' transaction. */
    private readonly operational: (trx: Kysely<Database>, messages: OutboxMessage[]) => Promise<void>,
  ) {
    // A queued delivery may wait behind (factor - 1) attempts that time out; it must still be sent
    // well inside its lease.
    const factor = Math.max(
      1,
      Math.min(MAX_BUFFER_FACTOR, Math.floor((config.leaseS * 1000) / 2 / config.timeoutMs)),
    );
    this.maxHeldPerEndpoint = config.endpointConcurrency * factor;
    this.maxHeld = config.concurrency * factor;
    // Each attempt in flight listens for the stop (sender.ts), up to `concurrency` at once.
    setMaxListeners(config.concurrency + 1, this.stop$.signal);
    // Results of concurrent attempts share one transaction (one writer on SQLite).
    this.settle = new Batcher(
      async (items) => {
        await this.writeResults(items);
        return items.map(() => undefined);
      },
      { name: 'webhook results group commit', maxBatch: 500 },
    );
  }

  start() {
    this.stopped = false;
    const poll = () => {
      this.wake();
      this.pollTimer = setTimeout(poll, this.config.pollMs);
      this.pollTimer.unref();
    };
    poll();
  }

  /** New rows were written (maybe not committed yet): look now, and a few times more if none are seen. */
  nudge() {
    this.expectUntil = performance.now() + EXPECT_WINDOW_MS;
    this.wake();
  }

  /**
   * Ingestion comes first: while its group commit is saturated (`load` ≥ 0.9: requests queue for the
   * store back to back), no round claims or expands anything until `yieldMs` after the last one;
   * deliveries already claimed are still sent and their results written. A flood is stored at nearly
   * the speed it would be without endpoints, and its deliveries follow as it ebbs (and at least one
   * round per `yieldMs` while it lasts); under a load the store keeps up with, nothing waits.
   */
  giveWayTo(load: () => number) {
    this.ingestionLoad = load;
  }

  /** Endpoints were added, changed or removed in this process (other processes' changes show within 2 s). */
  endpointsChanged() {
    this.endpointIds = null;
  }

  /** Stops claiming, cuts attempts in flight short and hands every held delivery back, due now. */
  async stop() {
    this.stopped = true;
    if (this.pollTimer) clearTimeout(this.pollTimer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.giveWayTimer) clearTimeout(this.giveWayTimer);
    this.stop$.abort();
    await this.round;
    const queued = [...this.queues.values()].flat();
    this.queues.clear();
    await Promise.allSettled([...this.tasks]);
    try {
      await store.releaseClaims(this.storage.db, queued.map(claimOf), this.clock.now());
    } catch (err) {
      this.logger.warn(
        { err },
        'could not hand back queued webhook deliveries; they are due when their lease ends',
      );
    }
    await this.sender.close();
  }

  private wake() {
    if (this.stopped) return;
    if (this.round) {
      this.again = true;
      return;
    }
    this.round = this.run().finally(() => {
      this.round = null;
    });
  }

  private async run() {
    let found = 0;
    do {
      this.again = false;
      const wait = this.holdOff();
      if (wait > 0) {
        this.giveWayTimer ??= setTimeout(() => {
          this.giveWayTimer = null;
          this.wake();
        }, wait);
        this.giveWayTimer.unref();
        return;
      }
      this.lastRound = performance.now();
      try {
        found += await this.claim();
        if (await this.shouldExpand()) {
          this.lastExpansion = performance.now();
          const expanded = await this.expand();
          if (expanded.written > 0 || expanded.more) this.again = true;
        }
      } catch (err) {
        if (!this.stopped) this.logger.error({ err }, 'webhook dispatch failed');
        return;
      }
    } while (this.again && !this.stopped);
    // Rows were announced but not seen: their transaction may still be committing.
    if (found === 0 && !this.stopped && performance.now() < this.expectUntil && !this.retryTimer) {
      this.retryTimer = setTimeout(() => {
        this.retryTimer = null;
        this.wake();
      }, EXPECT_RETRY_MS);
      this.retryTimer.unref();
    }
  }

  /** How long to give way to ingestion before the next round (`giveWayTo`); 0: go now. */
  private holdOff(): number {
    if (this.config.yieldMs === 0 || this.ingestionLoad() < SATURATED_LOAD) return 0;
    const left = this.lastRound + this.config.yieldMs - performance.now();
    return left > 0 ? Math.min(left, GIVE_WAY_CHECK_MS) : 0;
  }

  /**
   * Fan-out rows become deliveries while there is room for them: the events wait in their fan-out
   * rows (a few hundred per row) rather than as delivery rows the dispatcher cannot send yet. No
   * expansion while due deliveries were left behind for want of room overall. While every enabled
   * endpoint's queue is full (a flood all of them are behind on), one expansion a second; while only
   * some are full (say, a receiver that hangs), expansion goes on, so the others are not held up.
   */
  private async shouldExpand() {
    if (this.stopped || this.backlog) return false;
    if (this.backlogged.size === 0) return true;
    if (performance.now() - this.lastExpansion >= SATURATED_EXPANSION_MS) return true;
    const ids = await this.enabledEndpointIds(this.storage.db);
    return ids.some((id) => !this.backlogged.has(id));
  }

  /**
   * Expands the oldest fan-out rows into deliveries (`fanout.ts`), in one transaction. A look first,
   * outside it: a round that finds none (most, without endpoints) holds no writer (SQLite's one).
   */
  private async expand() {
    if (!(await store.anyFanout(this.storage.db))) return NO_FANOUT;
    const taken = await this.storage.db
      .transaction()
      .execute((trx) => expandFanout(this.storage, trx, this.clock.now(), this.expansionRows));
    this.expansionRows = rowsToTake(taken, this.expansionRows);
    return taken;
  }

  /**
   * Claims what the free places allow, queues it per endpoint and starts sending. Returns how many.
   * The usual claim is one `Storage.atomically` (one message to SQLite's writer, one query and round
   * trip to PostgreSQL): the oldest due rows within each endpoint's cap, and their endpoints' rows
   * (`store.claimDue`). Only when an endpoint is full may its rows hide other endpoints'
   * due rows further on, and a look at those follows (`probe`).
   */
  private async claim(): Promise<number> {
    const free = this.maxHeld - this.held;
    if (free <= 0) {
      this.backlog = true;
      return 0;
    }
    const now = this.clock.now();
    const leaseUntil = now + this.config.leaseS * 1000;
    const cap = this.maxHeldPerEndpoint;
    // What is held per endpoint as the claim begins, the claim's own rows added below (attempts
    // that end meanwhile do not make an endpoint the claim filled look open).
    const counts = new Counts(this.heldPer);
    const claim = await store.claimDue(this.storage, {
      now,
      leaseUntil,
      claimId: uuidv7(),
      want: Math.min(MAX_CANDIDATES, Math.max(16, free * CANDIDATES_PER_SLOT)),
      free,
      cap,
      held: [...counts],
    });
    const { claimed } = claim;
    const endpoints = new Map(claim.endpoints.map((e) => [e.webhook_id, e]));
    for (const d of claimed) counts.add(d.webhook_id, 1);
    // Endpoints at their cap whose due rows may go on: those this claim filled, and those full at
    // the last claim that still are.
    const full = new Set<string>();
    for (const [id, n] of counts) {
      if (n >= cap && (endpoints.has(id) || this.backlogged.has(id))) full.add(id);
    }
    if (full.size > 0 && claimed.length < free) {
      const more = await this.probe(full, counts, free - claimed.length, now, leaseUntil);
      if (more.length > 0) {
        const ids = [...new Set(more.map((d) => d.webhook_id))].filter((id) => !endpoints.has(id));
        for (const e of await store.endpointsByIds(this.storage.db, ids)) endpoints.set(e.webhook_id, e);
        claimed.push(...more);
      }
    }
    this.backlog = claimed.length >= free;
    this.backlogged.clear();
    for (const id of full) this.backlogged.add(id);
    if (claimed.length === 0) return 0;

    for (const delivery of claimed) {
      const queue = this.queues.get(delivery.webhook_id) ?? [];
      queue.push({ delivery, endpoint: endpoints.get(delivery.webhook_id), claimedAt: now });
      this.queues.set(delivery.webhook_id, queue);
      this.held++;
      this.heldPer.add(delivery.webhook_id, 1);
    }
    this.pump();
    return claimed.length;
  }

  /**
   * Rows left behind for full endpoints (a receiver that hangs, or a big backlog) may hide other
   * endpoints' due rows further on: looks at the other endpoints one by one, a few per round, and
   * claims theirs (`counts`: what is held per endpoint, claims included; `full` grows with the
   * endpoints found full). Where rows can be locked this is a transaction that holds them; elsewhere
   * (SQLite) the conditional update alone is safe, and skipping the transaction avoids lock upgrades
   * between processes sharing one file.
   */
  private async probe(full: Set<string>, counts: Counts, free: number, now: number, leaseUntil: number) {
    const cap = this.maxHeldPerEndpoint;
    const ids = await this.enabledEndpointIds(this.storage.db);
    const open = (id: string) => !full.has(id) && counts.of(id) < cap;
    if (!ids.some(open)) return [];
    const lock = this.storage.skipLocked;
    const inClaim = <T>(fn: (db: Kysely<Database>) => Promise<T>) =>
      lock ? this.storage.db.transaction().execute(fn) : fn(this.storage.db);
    let probes = 0;
    const claimed = await inClaim(async (trx) => {
      const picked: string[] = [];
      for (let i = 0; i < ids.length && probes < PROBES_PER_CLAIM && picked.length < free; i++) {
        const id = ids[(this.probeCursor + i) % ids.length];
        if (!open(id)) continue;
        probes++;
        const room = Math.min(cap - counts.of(id), free - picked.length);
        const rows = await store.dueDeliveriesOf(trx, id, { now, limit: room, lock });
        for (const r of rows) picked.push(r.delivery_id);
        counts.add(id, rows.length);
        if (rows.length === room) full.add(id);
      }
      return store.claimDeliveries(trx, picked, { now, leaseUntil, claimId: uuidv7() });
    });
    this.probeCursor = ids.length > 0 ? (this.probeCursor + probes) % ids.length : 0;
    return claimed;
  }

  private async enabledEndpointIds(trx: Kysely<Database>) {
    if (!this.endpointIds || performance.now() - this.endpointIds.at > ENDPOINT_LIST_TTL_MS) {
      this.endpointIds = { ids: await store.enabledEndpointIds(trx), at: performance.now() };
    }
    return this.endpointIds.ids;
  }

  /** Starts queued deliveries while slots are free, one endpoint after another (round robin). */
  private pump() {
    let progress = true;
    while (progress && this.flying < this.config.concurrency) {
      progress = false;
      for (const [webhookId, queue] of this.queues) {
        if (this.flying >= this.config.concurrency) break;
        if (this.flyingPer.of(webhookId) >= this.config.endpointConcurrency) continue;
        const item = queue.shift();
        if (queue.length === 0) this.queues.delete(webhookId);
        if (!item) continue;
        progress = true;
        this.launch(item);
      }
    }
  }

  private launch(item: Held) {
    const id = item.delivery.webhook_id;
    const done = () => {
      this.held--;
      this.heldPer.add(id, -1);
    };
    // A delivery that waited too long may be claimed by another process any moment: leave it to
    // whoever claims it when its lease ends, rather than risk sending it twice at once.
    if (this.clock.now() + this.config.timeoutMs > item.claimedAt + this.config.leaseS * 1000) {
      done();
      return;
    }
    this.flying++;
    this.flyingPer.add(id, 1);
    const task = this.attempt(item.delivery, item.endpoint)
      .catch((err: unknown) => this.logger.error({ err }, 'webhook attempt failed'))
      .finally(() => {
        this.flying--;
        this.flyingPer.add(id, -1);
        done();
        this.tasks.delete(task);
        if (this.stopped) return;
        this.pump();
        // Claim more once half the places are free (overall, or this endpoint's), not for every one.
        const refill =
          (this.backlog && this.held <= this.maxHeld / 2) ||
          (this.backlogged.has(id) && this.heldPer.of(id) <= this.maxHeldPerEndpoint / 2);
        if (refill) this.wake();
      });
    this.tasks.add(task);
  }

  private async attempt(delivery: store.DeliveryRow, endpoint: store.EndpointRow | undefined) {
    const at = this.clock.now();
    if (endpoint?.enabled !== 1) {
      this.record({ delivery, outcome: null, at });
      return;
    }
    const secrets = [endpoint.secret];
    if (endpoint.previous_secret && (endpoint.previous_secret_until ?? 0) > at) {
      secrets.push(endpoint.previous_secret);
    }
    const headers = webhookHeaders(secrets, delivery.delivery_id, at, delivery.payload);
    const outcome = await this.sender.send(
      endpoint.url,
      headers,
      delivery.payload,
      this.stop$.signal,
      delivery.attempts + 1,
    );
    if (this.stop$.signal.aborted) {
      // Shutting down: the receiver may or may not have it; it is due again at once (at-least-once).
      await store.releaseClaims(
        this.storage.db,
        [{ deliveryId: delivery.delivery_id, claimId: delivery.claim_id! }],
        this.clock.now(),
      );
      return;
    }
    this.metrics.attemptDuration.observe(
      { result: outcome.ok ? 'success' : 'failure' },
      outcome.latencyMs / 1000,
    );
    this.record({ delivery, outcome, at });
  }

  /**
   * Writes an attempt's result. Its slot is free already: the delivery stays claimed (under its
   * lease) until the result is written, so nobody sends it again meanwhile.
   */
  private record(result: Settled) {
    const write: Promise<void> = this.settle
      .submit(result)
      .catch((err: unknown) =>
        this.logger.error(
          { err },
          'could not record a webhook attempt; the delivery is due again after its lease',
        ),
      )
      .finally(() => this.tasks.delete(write));
    this.tasks.add(write);
  }

  private async writeResults(items: Settled[]) {
    const now = this.clock.now();
    const health = new Map<string, boolean>();
    /** Endpoints with a failed retry among these results (an outage, not a single failure). */
    const retriedFailing = new Set<string>();
    // Rows are settled in delivery id order, the order a replay locks them in (no deadlock between the two).
    const ordered = [...items].sort((a, b) =>
      a.delivery.delivery_id < b.delivery.delivery_id
        ? -1
        : a.delivery.delivery_id > b.delivery.delivery_id
          ? 1
          : 0,
    );
    const gone: Settled[] = [];
    const attempted: store.AttemptResult[] = [];
    for (const item of ordered) {
      const { delivery, outcome, at } = item;
      if (outcome === null) {
        gone.push(item);
        continue;
      }
      const attempts = delivery.attempts + 1;
      const attempt = {
        attempt_id: uuidv7(),
        delivery_id: delivery.delivery_id,
        webhook_id: delivery.webhook_id,
        attempted_at: at,
        status_code: outcome.statusCode,
        latency_ms: outcome.latencyMs,
        error: outcome.error,
      };
      const claimId = delivery.claim_id!;
      if (outcome.ok) {
        attempted.push({
          attempt,
          claimId,
          status: 'delivered',
          attempts,
          nextAttemptAt: null,
          completedAt: now,
        });
      } else {
        const next = afterFailure(this.config.retryScheduleS, attempts, now);
        attempted.push({
          attempt,
          claimId,
          status: next.retry ? 'pending' : 'failed',
          attempts,
          nextAttemptAt: next.retry ? next.at : now,
          completedAt: next.retry ? null : now,
        });
        if (attempts > 1) retriedFailing.add(delivery.webhook_id);
      }
      health.set(delivery.webhook_id, outcome.ok);
    }
    const { dialect } = this.storage;
    const everyOneDelivered = gone.length === 0 && attempted.every((r) => r.status === 'delivered');
    const disabled = everyOneDelivered
      ? await this.writeSuccesses(attempted, [...health.keys()].sort(), now)
      : await this.storage.db.transaction().execute(async (trx) => {
          if (this.storage.skipLocked)
            await store.lockDeliveries(
              trx,
              dialect,
              ordered.map((i) => i.delivery.delivery_id),
            );
          // Endpoint disabled or deleted before the attempt (rare): one by one.
          for (const { delivery } of gone) {
            await store.settleDelivery(trx, delivery.delivery_id, delivery.claim_id!, {
              status: 'failed',
              last_error: 'endpoint disabled or deleted',
              completed_at: now,
            });
          }
          await store.settleAttempted(trx, dialect, attempted);
          return this.recordHealth(trx, health, retriedFailing, now);
        });
    for (const r of attempted) {
      this.metrics.deliveries.inc({
        outcome: r.status === 'delivered' ? 'delivered' : r.status === 'pending' ? 'retrying' : 'failed',
      });
    }
    for (const e of disabled.off) {
      this.logger.warn(
        { webhookId: e.webhook_id, tenantId: e.tenant_id, failingForS: this.config.disableAfterS },
        'webhook endpoint disabled: nothing but failures',
      );
      this.metrics.endpointsDisabled.inc({ reason: 'failing' });
      this.onDisabled(e.tenant_id, e.webhook_id);
    }
    for (const e of disabled.recovered) {
      this.logger.info(
        { webhookId: e.webhook_id, tenantId: e.tenant_id, failingSince: e.outage_since },
        'webhook endpoint recovered',
      );
      this.metrics.endpointsRecovered.inc();
    }
  }

  /**
   * The usual group, every attempt a success: its statements are known up front, so they go to the
   * store as one `Storage.atomically` (one message to SQLite's thread; one query, one round trip, to
   * PostgreSQL) — the deliveries' row locks, their settlement and attempts, and a read of which of the
   * endpoints were in a run of failures. Only when one was (the success ends the run and reports
   * `webhook.endpoint.recovered`) does a transaction of its own follow, which locks those endpoints and
   * reads them again (`recordHealth`); a crash between the two leaves the run open until the next
   * success is recorded.
   */
  private async writeSuccesses(attempted: store.AttemptResult[], endpointIds: string[], now: number) {
    const { dialect, skipLocked } = this.storage;
    const results = await this.storage.atomically([
      ...(skipLocked
        ? store.lockDeliveriesStatements(
            dialect,
            attempted.map((r) => r.attempt.delivery_id),
          )
        : []),
      ...store.settleAttemptedStatements(dialect, attempted),
      store.inFailingRunStatement(dialect, endpointIds),
    ]);
    const inFailingRun = results[results.length - 1] as { webhook_id: string }[];
    if (inFailingRun.length === 0) return { off: [], recovered: [] };
    const health = new Map(inFailingRun.map((e) => [e.webhook_id, true]));
    return this.storage.db.transaction().execute((trx) => this.recordHealth(trx, health, new Set(), now));
  }

  /**
   * Endpoint health, in the results' transaction, or after a group of successes in one of its own
   * (`writeSuccesses`; each endpoint's last result counts): successes end
   * failing runs, and an outage's end is reported (`webhook.endpoint.recovered`, to the endpoint too);
   * failures start runs, and endpoints failing for `disableAfterS` are disabled, their pending
   * deliveries failed and the tenant's other endpoints told (`webhook.endpoint.disabled`). The
   * operational messages are written here, so they exist exactly when the change they report does.
   */
  private async recordHealth(
    trx: Kysely<Database>,
    health: Map<string, boolean>,
    retriedFailing: Set<string>,
    now: number,
  ) {
    const ids = [...health.keys()].sort();
    // Every endpoint of these results locked first, in id order (where rows lock): two processes
    // settling one endpoint's success and another's failure in opposite orders cannot deadlock.
    if (this.storage.skipLocked) await store.lockEndpoints(trx, ids);
    const healthy = ids.filter((id) => health.get(id));
    const failing = ids.filter((id) => !health.get(id));
    const recovered = await store.recordEndpointSuccesses(trx, healthy, this.storage.skipLocked);
    for (const id of failing) await store.recordEndpointFailure(trx, id, retriedFailing.has(id), now);
    const failingBefore = now - this.config.disableAfterS * 1000;
    const off = await store.disableFailingEndpoints(trx, failing, failingBefore, now);
    for (const e of off) await store.failPending(trx, e.webhook_id, 'endpoint disabled after failing', now);
    const ref = (e: { webhook_id: string; tenant_id: string; url: string }) => ({
      webhookId: e.webhook_id,
      tenantId: e.tenant_id,
      url: e.url,
    });
    await this.operational(trx, [
      ...recovered.map((e) => endpointRecovered(ref(e), e.outage_since, now)),
      ...off.map((e) => endpointDisabled(ref(e), 'failing', now)),
    ]);
    return { off, recovered };
  }
}
