import type { Kysely } from 'kysely';
import { Batcher } from '../../batcher.ts';
import type { Clock } from '../../clock.ts';
import type { PageRequest } from '../../http/pagination.ts';
import { ProblemError, problems } from '../../http/problem.ts';
import { uuidv7 } from '../../ids.ts';
import type { CommandOutcome, SettledCommand, Signals } from '../../signals.ts';
import { type Database, runStatements, type Storage } from '../../storage/index.ts';
import type { SessionRow } from '../sessions/index.ts';
import type { CommandDelivery } from './delivery.ts';
import { CommandQueues, type QueueOptions } from './queues.ts';
import type { CommandRow } from './store.ts';
import * as store from './store.ts';

export type CommandStatus = 'queued' | 'delivered' | 'acknowledged' | 'failed' | 'expired' | 'cancelled';

export interface IssueCommand {
  name: string;
  data: unknown;
  ttlSeconds: number;
  idempotencyKey: string | null;
  /** Digest of the request, so a reused Idempotency-Key with another request is refused. */
  requestHash: string | null;
  /** The cohort-wide command (CONTRACT §12) this one is part of. */
  batchId?: string | null;
}

/**
 * Runs in the command's transaction before its row is written (the streams module moves its state
 * machine here, so both happen or neither); may refuse with a problem, or add fields to the data.
 * A refusal (a thrown problem, status below 500) must come before the hook writes anything: the
 * command is left out and the other commands of its group still commit in the same transaction.
 */
export type IssueHook = (
  trx: Kysely<Database>,
  session: SessionRow,
  command: { commandId: string; data: unknown },
) => Promise<Record<string, unknown> | undefined>;

/**
 * Runs in the transaction that settles a command of the names it was registered for (acknowledged,
 * failed, expired or cancelled): the streams module moves its state machine, with its events, there,
 * so the settlement and what follows from it commit together or not at all.
 */
export type SettleHook = (trx: Kysely<Database>, command: SettledCommand) => Promise<void>;

/** A device's answer; `hooked`: its command may have a settle hook (its name is not known here, or has one). */
type Ack = store.Settlement & { hooked: boolean };

/** How long a retry waits for the answer of a first request with its Idempotency-Key still under way. */
const ANSWER_WAIT_MS = 5000;

interface PendingInsert {
  row: CommandRow;
  session: SessionRow;
  hook: IssueHook | undefined;
  /** Set when the session's queue is full (`CommandQueues`): the command is not written. */
  refused?: ProblemError;
}

export type AckResult = 'settled' | 'unknown' | 'expired' | 'already_settled';

/** A write to the command log: a new command, or a device's answer to one. */
type LogWrite = { insert: PendingInsert } | { ack: Ack };

/**
 * The command log (CONTRACT §3): issuing, acknowledgements and expiry. Concurrent commands share one
 * transaction (group commit), and so do acks; delivery to the device is `CommandDelivery`'s.
 */
export class CommandsService {
  private readonly log: Batcher<LogWrite, CommandRow | undefined>;
  private readonly hooks = new Map<string, IssueHook>();
  private readonly settleHooks = new Map<string, SettleHook>();
  /** Unsettled commands per session, for the queue quota. */
  private readonly queues: CommandQueues;
  /** Views `issue` answered from an earlier request with the same Idempotency-Key. */
  private readonly replays = new WeakSet<object>();

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly delivery: CommandDelivery,
    private readonly signals: Signals,
    options: { queue: QueueOptions } = { queue: { limit: 0, shared: false } },
  ) {
    this.queues = new CommandQueues(storage, clock, options.queue);
    // Commands accepted by other processes count in this one's queues too.
    delivery.onCommandElsewhere((sessionId, commandId, expiresAt) =>
      this.queues.addedElsewhere(sessionId, commandId, expiresAt),
    );
    // New commands and acks share one queue and one transaction per group (one commit, not two).
    // One writer keeps a session's commands committed, and so delivered, in the order they were accepted.
    this.log = new Batcher((writes) => this.writeAdmitted(writes), {
      name: 'commands group commit',
      retryAlone: true,
      gather: true,
      // A device's ack waits for nothing: on PostgreSQL it rides along with the next group of new
      // commands (`store.ackLinger`).
      linger: store.ackLinger(storage.dialect),
    });
  }

  /** Runs `hook` in the transaction of every command named `name` (the stream and record commands). */
  onIssue(name: string, hook: IssueHook) {
    this.hooks.set(name, hook);
  }

  /** Runs `hook` in the transaction that settles a command named one of `names`. */
  onSettle(names: readonly string[], hook: SettleHook) {
    for (const name of names) this.settleHooks.set(name, hook);
  }

  /**
   * Stores a command (durable before the answer), then hands it to delivery, which writes it to the
   * device's socket wherever it is. The answer says how far delivery got: `delivered` or `queued`.
   */
  async issue(session: SessionRow, input: IssueCommand) {
    const replay = await this.replayed(session, input);
    if (replay) return replay;
    if (session.status !== 'live') throw problems.sessionEnded();
    const now = this.clock.now();
    const pending: PendingInsert = {
      session,
      hook: this.hooks.get(input.name),
      row: {
        command_id: uuidv7(),
        session_id: session.session_id,
        tenant_id: session.tenant_id,
        name: input.name,
        data: JSON.stringify(input.data ?? null),
        status: 'queued',
        issued_at: now,
        expires_at: now + input.ttlSeconds * 1000,
        delivered_at: null,
        settled_at: null,
        error: null,
        idempotency_key: input.idempotencyKey,
        request_hash: input.requestHash,
        batch_id: input.batchId ?? null,
      },
    };
    let row: CommandRow;
    try {
      row = (await this.log.submit({ insert: pending })) as CommandRow;
      if (pending.refused) throw pending.refused;
    } catch (err) {
      // A concurrent retry with the same key may have won the race: answer with its command.
      const raced = await this.replayed(session, input);
      if (raced) return raced;
      throw err;
    }
    // The data as stored: a hook may have added to it (then read once for the frame and the answer).
    const data = pending.hook ? (JSON.parse(row.data) as unknown) : (input.data ?? null);
    const deliveredAt = await this.delivery.deliver(session.session_id, {
      commandId: row.command_id,
      name: row.name,
      data,
      issuedAt: row.issued_at,
    });
    // The answer tells how far delivery got (CONTRACT §3), even when a quick device has acked already.
    const view = this.view(row, data);
    return deliveredAt === null ? view : { ...view, status: 'delivered' as const, deliveredAt };
  }

  /**
   * One group of the log, one transaction: its new commands, then its acks; each write's row, in
   * order. Without hooks every statement is known up front and the group goes to the store at once
   * (`Storage.atomically`: one message to SQLite's writer thread); a stream or record command's hook
   * runs its compare-and-set in an open transaction first.
   */
  private async writeLog(writes: LogWrite[]): Promise<(CommandRow | undefined)[]> {
    const inserts: PendingInsert[] = [];
    const acks: Ack[] = [];
    for (const w of writes) {
      if ('insert' in w) inserts.push(w.insert);
      else acks.push(w.ack);
    }
    const { dialect, db } = this.storage;
    const settle = store.settleStatements(db, dialect, acks, this.clock.now(), {
      lockInOrder: this.storage.skipLocked,
    });
    const statementsFor = (rows: CommandRow[]) => [
      ...store.insertStatements(dialect, rows),
      ...settle.statements,
    ];
    const answers = (results: unknown[][]) =>
      settle.read(results.slice(results.length - settle.statements.length));
    let rows: (CommandRow | undefined)[];
    let settledRows: (CommandRow | undefined)[];
    if (inserts.every((i) => i.hook === undefined) && acks.every((a) => !a.hooked)) {
      const plain = inserts.map((i) => i.row);
      rows = plain;
      // A group of plain acks only commits without waiting for the disk (`durable: false`): a crash of
      // the process loses nothing, and the next group with a command makes it durable (one fsync of
      // SQLite's log). Lost to a power cut in between, the command is delivered again on the device's
      // next connection and answered again (at-least-once), as after any lost ack. Its own fsync held
      // the writer 1–6 ms while the next group of new commands, which a 202 waits for, stood behind it.
      settledRows = answers(
        await this.storage.atomically(statementsFor(plain), { durable: inserts.length > 0 }),
      );
    } else {
      [rows, settledRows] = await db.transaction().execute(async (trx) => {
        const hooked = await this.runHooks(trx, inserts);
        const out = await runStatements(trx, statementsFor(hooked.filter((row) => row !== undefined)));
        const settledNow = answers(out);
        for (const [i, row] of settledNow.entries()) {
          if (row) await this.runSettleHook(trx, row, acks[i].status);
        }
        return [hooked, settledNow] as const;
      });
    }
    let r = 0;
    let a = 0;
    return writes.map((w) => ('insert' in w ? rows[r++] : settledRows[a++]));
  }

  /** The settle hook of the row's command, if it has one, in the settling transaction `trx`. */
  private async runSettleHook(trx: Kysely<Database>, row: CommandRow, outcome: CommandOutcome) {
    const hook = this.settleHooks.get(row.name);
    if (hook) await hook(trx, settled(row, outcome));
  }

  /**
   * The hooks run in order (a stream's compare-and-set); each may add fields to its command's data,
   * or refuse it (its `refused`; no row): the group's other commands go on (a cohort's stream
   * command refused by the sessions already streaming).
   */
  private async runHooks(trx: Kysely<Database>, items: PendingInsert[]) {
    const rows: (CommandRow | undefined)[] = [];
    for (const item of items) {
      const { row, session, hook } = item;
      let extra: Record<string, unknown> | undefined;
      try {
        extra = hook
          ? await hook(trx, session, { commandId: row.command_id, data: JSON.parse(row.data) })
          : undefined;
      } catch (err) {
        if (!(err instanceof ProblemError) || err.status >= 500) throw err;
        item.refused = err;
        rows.push(undefined);
        continue;
      }
      rows.push(
        extra ? { ...row, data: JSON.stringify({ ...(JSON.parse(row.data) as object), ...extra }) } : row,
      );
    }
    return rows;
  }

  private async replayed(session: SessionRow, input: IssueCommand) {
    if (!input.idempotencyKey) return null;
    const existing = await store.findByIdempotencyKey(
      this.storage.db,
      session.tenant_id,
      session.session_id,
      input.idempotencyKey,
    );
    if (!existing) return null;
    if (existing.request_hash !== input.requestHash) throw problems.idempotencyKeyReused();
    const view = this.view(existing);
    this.replays.add(view);
    return view;
  }

  async find(sessionId: string, commandId: string) {
    const row = await store.findCommand(this.storage.db, sessionId, commandId);
    return row ? this.view(row) : null;
  }

  /** The session is deleted (the sessions module's `onRemoving` hook): its commands go with it. */
  /** Erasure (the players module): up to `limit` commands (and batch refusals) of these sessions; rows deleted. */
  eraseSessions(sessionIds: string[], limit: number): Promise<number> {
    return store.eraseSessionCommands(this.storage.db, sessionIds, limit);
  }

  async forgetSession(trx: Kysely<Database>, sessionId: string) {
    await store.deleteSessionCommands(trx, sessionId);
  }

  async list(sessionId: string, page: PageRequest) {
    const { rows, ...meta } = await store.listCommands(this.storage.db, sessionId, page);
    return { commands: rows.map((r) => this.view(r)), ...meta };
  }

  /** Records the device's answer to a command and tells the modules that wait on it. */
  async acknowledge(sessionId: string, commandId: string, ok: boolean, error: unknown): Promise<AckResult> {
    const name = this.delivery.nameOf(sessionId, commandId);
    const row = await this.log.submit({
      ack: {
        sessionId,
        commandId,
        status: ok ? 'acknowledged' : 'failed',
        error: ok ? null : JSON.stringify(error ?? 'failed'),
        hooked: name === undefined || this.settleHooks.has(name),
      },
    });
    if (!row) {
      const existing = await store.findCommand(this.storage.db, sessionId, commandId);
      if (!existing) return 'unknown';
      return existing.status === 'queued' || existing.status === 'delivered' || existing.status === 'expired'
        ? 'expired'
        : 'already_settled';
    }
    this.delivery.settled(sessionId, commandId);
    await this.reportSettled(row, ok ? 'acknowledged' : 'failed');
    return 'settled';
  }

  /**
   * Expires open commands past their time and reports each; returns how many. A look first, outside
   * a transaction: most runs find nothing, and then hold no writer (SQLite's one) at all.
   */
  async sweepExpired(): Promise<number> {
    if (!(await store.anyExpired(this.storage.db, this.clock.now()))) return 0;
    const expired = await this.storage.db.transaction().execute(async (trx) => {
      const rows = await store.expireCommands(trx, this.clock.now());
      for (const row of rows) await this.runSettleHook(trx, row, 'expired');
      return rows;
    });
    for (const row of expired) {
      this.queues.settled(row.session_id, row.command_id);
      await this.reportSettled(row, 'expired');
    }
    return expired.length;
  }

  /**
   * The session's queue quota (`CommandQueues`), then the group as `writeLog` writes it; refused
   * commands are left out (their `refused` says why). The queues learn what was committed.
   */
  private async writeAdmitted(writes: LogWrite[]): Promise<(CommandRow | undefined)[]> {
    const inserts: PendingInsert[] = [];
    for (const w of writes) if ('insert' in w) inserts.push(w.insert);
    for (const insert of inserts) insert.refused = undefined;
    const verdicts = await this.queues.admit(inserts.map((i) => i.row));
    verdicts.forEach((refusal, n) => {
      if (refusal) inserts[n].refused = refusal;
    });
    const kept: LogWrite[] = [];
    // Where each write is in `kept` (-1: refused by its queue). A hook may refuse a kept one too.
    const at = writes.map((w) => ('insert' in w && w.insert.refused ? -1 : kept.push(w) - 1));
    const rows = kept.length > 0 ? await this.writeLog(kept) : [];
    kept.forEach((w, n) => {
      const row = rows[n];
      if (!row) return;
      if ('insert' in w) {
        this.queues.added(row);
        this.delivery.accept(row.session_id, row.command_id, row.expires_at);
      } else this.queues.settled(row.session_id, row.command_id);
    });
    return at.map((k) => (k < 0 ? undefined : rows[k]));
  }

  /**
   * Issues a command sent with an `Idempotency-Key` and answers as the first request with that key
   * was answered, byte for byte (CONTRACT §3): the first answer (`render` of the command's view) is
   * kept with the command before it is sent, and a retry gets it again, whatever the command has
   * come to since. 409 `idempotency_key_reused` for another request with the same key.
   */
  async issueOnce(session: SessionRow, input: IssueCommand, render: (view: CommandView) => string) {
    const first = await this.firstAnswer(session, input, render);
    if (first) return first;
    const view = await this.issue(session, input);
    // A concurrent request with the same key won the race: its answer is the first one.
    if (this.replays.has(view))
      return (await this.firstAnswer(session, input, render)) ?? this.keep(view, render);
    return this.keep(view, render);
  }

  /** The answer kept for the request's key, waiting briefly for one still on its way; null for a new key. */
  private async firstAnswer(session: SessionRow, input: IssueCommand, render: (view: CommandView) => string) {
    if (!input.idempotencyKey) return null;
    const { db } = this.storage;
    const existing = await store.findByIdempotencyKey(
      db,
      session.tenant_id,
      session.session_id,
      input.idempotencyKey,
    );
    if (!existing) return null;
    if (existing.request_hash !== input.requestHash) throw problems.idempotencyKeyReused();
    // The first request may still be delivering (up to `remoteWaitMs`) before it keeps its answer.
    const until = performance.now() + ANSWER_WAIT_MS;
    for (;;) {
      const answer = await store.findAnswer(db, existing.command_id);
      if (answer) return answer;
      if (performance.now() >= until || this.clock.now() - existing.issued_at > ANSWER_WAIT_MS) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // The first request never kept an answer (its process stopped first), so no one saw one: this is it.
    return this.keep(this.view(existing), render);
  }

  /** Keeps `view` as the command's first answer, unless one is kept already; returns the kept one. */
  private keep(view: CommandView, render: (view: CommandView) => string) {
    return store.keepAnswer(this.storage.db, {
      command_id: view.commandId,
      status_code: 202,
      body: render(view),
      created_at: this.clock.now(),
    });
  }

  /**
   * Cancels a command still queued or delivered (CONTRACT §14): it ends `cancelled`, the device is
   * told (`command.cancel`, wherever its socket is) and the modules waiting on it hear
   * `command.settled` with `cancelled` (a stream or recording that was starting goes back to idle).
   * 404 for an unknown command; 409 `command_settled` for one that is settled (or expired) already.
   */
  async cancel(session: SessionRow, commandId: string): Promise<CommandView> {
    const sessionId = session.session_id;
    const now = this.clock.now();
    const writtenAt = this.delivery.writtenAt(commandId) ?? null;
    const row = await this.storage.db.transaction().execute(async (trx) => {
      const cancelled = await store.cancelCommand(trx, sessionId, commandId, now, writtenAt);
      if (cancelled) await this.runSettleHook(trx, cancelled, 'cancelled');
      return cancelled;
    });
    if (!row) {
      const existing = await store.findCommand(this.storage.db, sessionId, commandId);
      if (!existing) throw problems.notFound('command');
      throw problems.commandSettled(this.view(existing).status);
    }
    this.queues.settled(sessionId, commandId);
    this.delivery.settled(sessionId, commandId);
    await this.delivery.cancel(sessionId, commandId);
    await this.reportSettled(row, 'cancelled');
    return this.view(row);
  }

  /** `command.settled` for the modules that listen (none may: then nothing is built). */
  private async reportSettled(row: CommandRow, outcome: CommandOutcome) {
    if (this.signals.listens('command.settled'))
      await this.signals.emit('command.settled', settled(row, outcome));
  }

  /**
   * The command as the API shows it (`data`: the row's, parsed already). An open command past its
   * expiry is shown expired at once.
   */
  view(row: CommandRow, data: unknown = JSON.parse(row.data)) {
    // Written to the socket here, its delivery time still being committed.
    const writtenAt = row.status === 'queued' ? this.delivery.writtenAt(row.command_id) : undefined;
    if (writtenAt !== undefined) row = { ...row, status: 'delivered', delivered_at: writtenAt };
    const open = row.status === 'queued' || row.status === 'delivered';
    const status = (open && row.expires_at <= this.clock.now() ? 'expired' : row.status) as CommandStatus;
    return {
      commandId: row.command_id,
      sessionId: row.session_id,
      name: row.name,
      data,
      status,
      issuedAt: row.issued_at,
      expiresAt: row.expires_at,
      deliveredAt: row.delivered_at,
      settledAt: row.settled_at ?? (status === 'expired' ? row.expires_at : null),
      error: row.error === null ? null : (JSON.parse(row.error) as unknown),
      batchId: row.batch_id,
    };
  }
}

function settled(row: CommandRow, outcome: CommandOutcome): SettledCommand {
  return {
    commandId: row.command_id,
    sessionId: row.session_id,
    tenantId: row.tenant_id,
    name: row.name,
    data: (JSON.parse(row.data) ?? {}) as Record<string, unknown>,
    outcome,
    error: row.error === null ? null : (JSON.parse(row.error) as unknown),
  };
}

export type CommandView = ReturnType<CommandsService['view']>;
