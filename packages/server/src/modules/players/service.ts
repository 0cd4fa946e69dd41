import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Clock } from '../../clock.ts';
import type { PageRequest } from '../../http/pagination.ts';
import { uuidv7 } from '../../ids.ts';
import type { Job } from '../../jobs.ts';
import type { Outbox } from '../../outbox.ts';
import type { Database, Storage } from '../../storage/index.ts';
import * as store from './store.ts';

/** Rows one erase call deletes at most (each call is its own short transaction). */
export const ERASURE_BATCH = 500;
/** Erased sessions handed to the erasers at once. */
const SESSIONS_PER_STEP = 100;
/** Sessions, commands and claims read per export page. */
const EXPORT_PAGE = 100;

/** What an erasure reaches: the player, and the ids of the sessions it deleted. */
export interface ErasureScope {
  tenantId: string;
  playerId: string;
  sessionIds: string[];
}

/**
 * One module's share of an erasure: deletes at most `limit` rows it keeps of the scope (in its own
 * short transaction) and says how many; 0 when nothing is left. Registered by the wiring.
 */
export type Eraser = (scope: ErasureScope, limit: number) => Promise<number>;

/** An erasure's sessions are gone: the wiring makes every process forget them and close their sockets. */
export type ErasedListener = (erased: {
  tenantId: string;
  playerId: string;
  sessionIds: string[];
}) => Promise<void>;

/** A session as the players module reads it (the sessions module's view). */
export type SessionView = { sessionId: string } & Record<string, unknown>;

/** What the players module uses of the others: small structural interfaces, built in `compose.ts`. */
export interface PlayersDeps {
  sessions: {
    /** A page of the player's sessions, newest first, as the API shows them. */
    playerPage(
      tenantId: string,
      playerId: string,
      page: PageRequest,
    ): Promise<{
      items: SessionView[];
      totalCount: number;
      totalCountExact: boolean;
      hasMore: boolean;
      nextCursor: string | null;
    }>;
    /** Deletes the player's sessions started at or before `upTo` in `trx`; their ids. */
    erasePlayerIn(
      trx: Kysely<Database>,
      tenantId: string,
      playerId: string,
      upTo: number,
      limit: number,
    ): Promise<string[]>;
  };
  events: { sessionEventBodies(sessionId: string): AsyncIterable<string> };
  commands: {
    commandPage(
      sessionId: string,
      page: PageRequest,
    ): Promise<{ items: Record<string, unknown>[]; nextCursor: string | null }>;
  };
  screenshots: {
    ofSession(
      sessionId: string,
    ): Promise<{ image_id: string; width: number; height: number; created_at: number }[]>;
  };
  claims: {
    playerPage(
      tenantId: string,
      playerId: string,
      afterId: number,
      limit: number,
    ): Promise<{ claimId: number }[]>;
  };
  tokens: {
    /** Revokes the player's device tokens in `trx`; the function applies it everywhere once committed. */
    revokePlayerTokensIn(
      trx: Kysely<Database>,
      tenantId: string,
      playerId: string,
      at: number,
    ): Promise<() => Promise<void>>;
  };
}

export interface PlayersOptions {
  /** How often the erasure job runs (LIVELINE_ERASURE_INTERVAL_MS). */
  intervalMs: number;
  /** An erasure completes no sooner than this after it was asked (LIVELINE_ERASURE_GRACE_MS). */
  graceMs: number;
}

/** Who asked: the operator, or the tenant's client. */
export type Actor = string;

export interface ExportCounts {
  sessions: number;
  events: number;
  commands: number;
  screenshots: number;
  claims: number;
}

/**
 * Players' data (CONTRACT §16): a player's sessions, the NDJSON export of everything kept of them,
 * and the erasure — at once for reads (the session rows go in the request's transaction, with the
 * token revocation and `player.erased`), then physically in small batches by a job, module by module
 * through the erasers the wiring registers. The audit log records every export and erasure.
 */
export class PlayersService {
  private readonly erasers: { kind: string; erase: Eraser }[] = [];
  private readonly erasedListeners: ErasedListener[] = [];

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly outbox: Outbox,
    private readonly deps: PlayersDeps,
    private readonly logger: Logger,
    readonly options: PlayersOptions,
  ) {}

  /** Adds a module's share of every erasure (run in registration order, each until it finds nothing). */
  addEraser(kind: string, erase: Eraser) {
    this.erasers.push({ kind, erase });
  }

  /** Hears of sessions an erasure deleted (after their deletion committed). */
  onErased(listener: ErasedListener) {
    this.erasedListeners.push(listener);
  }

  /** A page of the player's sessions, newest first; an unknown player has none. */
  sessions(tenantId: string, playerId: string, page: PageRequest) {
    return this.deps.sessions.playerPage(tenantId, playerId, page);
  }

  // --- export ----------------------------------------------------------------------------------------

  /** Records an export in the audit log (before its first byte); its id, for the counts at the end. */
  async auditExport(tenantId: string, playerId: string, actor: Actor): Promise<string> {
    const auditId = uuidv7();
    await store.insertAudit(this.storage.db, {
      audit_id: auditId,
      tenant_id: tenantId,
      action: 'player.export',
      player_id: playerId,
      actor,
      at: this.clock.now(),
      counts: null,
      erasure_id: null,
    });
    return auditId;
  }

  /**
   * The export's lines, each ending in `\n`: a `player` header; each session (newest first) followed
   * by its events, commands and screenshot references; the player's claims; last `end` with the
   * counts. Every read is a keyset page, so memory stays flat however much the player has.
   */
  async *exportLines(
    tenantId: string,
    playerId: string,
    auditId: string,
    imageBase: string,
  ): AsyncGenerator<string> {
    const { events, commands, screenshots, claims } = this.deps;
    const counts: ExportCounts = { sessions: 0, events: 0, commands: 0, screenshots: 0, claims: 0 };
    yield line({ kind: 'player', playerId, exportedAt: this.clock.now() });
    let after: string | undefined;
    do {
      const page = await this.deps.sessions.playerPage(tenantId, playerId, {
        page: 1,
        pageSize: EXPORT_PAGE,
        after,
      });
      for (const session of page.items) {
        yield line({ kind: 'session', ...session });
        counts.sessions++;
        const sessionId = session.sessionId;
        for await (const body of events.sessionEventBodies(sessionId)) {
          // A stored body is a JSON object (with its sessionId): `{"kind":"event",` takes the place of its `{`.
          yield `{"kind":"event",${body.slice(1)}\n`;
          counts.events++;
        }
        let commandsAfter: string | undefined;
        do {
          const cmds = await commands.commandPage(sessionId, {
            page: 1,
            pageSize: EXPORT_PAGE,
            after: commandsAfter,
          });
          for (const command of cmds.items) {
            yield line({ kind: 'command', sessionId, ...command });
            counts.commands++;
          }
          commandsAfter = cmds.nextCursor ?? undefined;
        } while (commandsAfter);
        for (const shot of await screenshots.ofSession(sessionId)) {
          yield line({
            kind: 'screenshot',
            sessionId,
            imageId: shot.image_id,
            width: shot.width,
            height: shot.height,
            takenAt: Number(shot.created_at),
            url: `${imageBase}/sessions/${sessionId}/screenshots/${shot.image_id}`,
          });
          counts.screenshots++;
        }
      }
      after = page.nextCursor ?? undefined;
    } while (after);
    let claimAfter = 0;
    for (;;) {
      const page = await claims.playerPage(tenantId, playerId, claimAfter, EXPORT_PAGE);
      for (const claim of page) yield line({ kind: 'claim', ...claim });
      counts.claims += page.length;
      if (page.length < EXPORT_PAGE) break;
      claimAfter = page[page.length - 1].claimId;
    }
    await store.setAuditCounts(this.storage.db, auditId, { ...counts });
    yield line({ kind: 'end', counts });
  }

  // --- erasure ---------------------------------------------------------------------------------------

  /**
   * Erases a player (CONTRACT §16). In one transaction: the erasure and its audit row, the device
   * tokens revoked, the session rows deleted (every read of them is a 404 from the commit on), their
   * ids kept for the job, and `player.erased` in the outbox. Then the revocation and the sessions'
   * end reach every process (sockets close with 4003, caches forget). While an erasure of the player
   * is pending, its `erasedAt` is answered again.
   */
  async erase(
    tenantId: string,
    playerId: string,
    actor: Actor,
  ): Promise<{ playerId: string; erasedAt: number }> {
    const erasedAt = this.clock.now();
    let outcome: { pending: number } | { sessionIds: string[]; announce: () => Promise<void> };
    try {
      outcome = await this.storage.db.transaction().execute(async (trx) => {
        const pending = await store.pendingErasure(trx, tenantId, playerId);
        if (pending) return { pending: Number(pending.erased_at) };
        const erasureId = uuidv7();
        const announce = await this.deps.tokens.revokePlayerTokensIn(trx, tenantId, playerId, erasedAt);
        const sessionIds = await this.deps.sessions.erasePlayerIn(
          trx,
          tenantId,
          playerId,
          erasedAt,
          ERASURE_BATCH,
        );
        await store.insertErasure(trx, {
          erasure_id: erasureId,
          tenant_id: tenantId,
          player_id: playerId,
          erased_at: erasedAt,
          actor,
          state: 'pending',
          counts: JSON.stringify({ sessions: sessionIds.length }),
          completed_at: null,
          lease_until: 0,
        });
        await store.addErasureSessions(trx, erasureId, sessionIds);
        await store.insertAudit(trx, {
          audit_id: uuidv7(),
          tenant_id: tenantId,
          action: 'player.erase',
          player_id: playerId,
          actor,
          at: erasedAt,
          counts: null,
          erasure_id: erasureId,
        });
        await this.outbox.enqueue(trx, [
          { tenantId, type: 'player.erased', data: { playerId, erasedAt }, occurredAt: erasedAt },
        ]);
        return { sessionIds, announce };
      });
    } catch (err) {
      // Two requests at once: the other one's erasure is the pending one (unique per player).
      if (!this.storage.isUniqueViolation(err)) throw err;
      const pending = await store.pendingErasure(this.storage.db, tenantId, playerId);
      if (!pending) throw err;
      outcome = { pending: Number(pending.erased_at) };
    }
    if ('pending' in outcome) return { playerId, erasedAt: outcome.pending };
    await outcome.announce();
    await this.announce({ tenantId, playerId, sessionIds: outcome.sessionIds });
    return { playerId, erasedAt };
  }

  private async announce(erased: { tenantId: string; playerId: string; sessionIds: string[] }) {
    if (erased.sessionIds.length === 0) return;
    for (const listener of this.erasedListeners) await listener(erased);
  }

  /**
   * The job: each pending erasure no process holds is leased and worked on — sessions of the player
   * that started before the erasure but were written after it, then every eraser over the erased
   * sessions, in batches, until it finds nothing. An erasure is done after a whole pass that found
   * nothing, and not before `graceMs` after `erasedAt`: a batch accepted a moment before its session
   * was deleted has committed by then, and a later pass catches it. Returns the erasures completed.
   */
  async runErasures(): Promise<number> {
    const now = this.clock.now();
    let completed = 0;
    for (const row of await store.dueErasures(this.storage.db, now, 20)) {
      // Held for a few runs: a process that dies mid-pass lets another take it once the lease ends.
      if (!(await store.lease(this.storage.db, row, now + Math.max(30_000, this.options.intervalMs * 4))))
        continue;
      try {
        if (await this.work(row)) completed++;
      } catch (err) {
        await store.release(this.storage.db, row.erasure_id, parseCounts(row.counts));
        throw err;
      }
    }
    return completed;
  }

  /** One pass over one erasure; true when it completed. */
  private async work(row: store.ErasureRow): Promise<boolean> {
    const db = this.storage.db;
    const counts = parseCounts(row.counts);
    const add = (kind: string, n: number) => {
      counts[kind] = (counts[kind] ?? 0) + n;
    };
    const { tenant_id: tenantId, player_id: playerId, erasure_id: erasureId } = row;
    const erasedAt = Number(row.erased_at);
    let found = 0;
    // Sessions whose start was being written when the erasure committed (a token checked just before
    // it): any session started within the erasure's second (a token minted after it is refused until
    // the next second: tokens carry whole seconds).
    const upTo = Math.floor(erasedAt / 1000) * 1000 + 999;
    const late = await db.transaction().execute(async (trx) => {
      const ids = await this.deps.sessions.erasePlayerIn(trx, tenantId, playerId, upTo, ERASURE_BATCH);
      await store.addErasureSessions(trx, erasureId, ids);
      return ids;
    });
    if (late.length > 0) {
      found += late.length;
      await this.announce({ tenantId, playerId, sessionIds: late });
    }
    add('sessions', late.length);
    let after = '';
    for (;;) {
      const sessionIds = await store.erasureSessionIds(db, erasureId, after, SESSIONS_PER_STEP);
      const scope = { tenantId, playerId, sessionIds };
      for (const { kind, erase } of this.erasers) {
        for (;;) {
          const n = await erase(scope, ERASURE_BATCH);
          add(kind, n);
          found += n;
          if (n === 0) break;
        }
      }
      if (sessionIds.length < SESSIONS_PER_STEP) break;
      after = sessionIds[sessionIds.length - 1];
    }
    const now = this.clock.now();
    if (found === 0 && now >= erasedAt + this.options.graceMs) {
      await store.complete(db, erasureId, counts, now);
      this.logger.info({ tenantId, erasureId, counts }, 'player erasure completed');
      return true;
    }
    await store.release(db, erasureId, counts);
    return false;
  }

  /** The erasure job (`jobs.ts`). */
  job(): Job {
    return {
      name: 'players.erasure',
      everyMs: this.options.intervalMs,
      runAtStart: true,
      run: () => this.runErasures(),
    };
  }

  // --- audit -----------------------------------------------------------------------------------------

  async audit(filter: store.AuditFilter, page: PageRequest) {
    const { rows, ...meta } = await store.listAudit(this.storage.db, filter, page);
    return {
      items: rows.map((r) => ({
        auditId: r.audit_id,
        tenantId: r.tenant_id,
        action: r.action as 'player.export' | 'player.erase',
        playerId: r.player_id,
        actor: r.actor,
        at: Number(r.at),
        counts: r.counts === null ? null : (JSON.parse(r.counts) as Record<string, number>),
      })),
      ...meta,
    };
  }
}

const line = (value: unknown) => `${JSON.stringify(value)}\n`;

function parseCounts(text: string | null): Record<string, number> {
  return text === null ? {} : (JSON.parse(text) as Record<string, number>);
}
