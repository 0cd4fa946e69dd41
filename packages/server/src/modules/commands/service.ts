import type { Kysely } from 'kysely';
import { uuidv7 } from 'uuidv7';
import { Batcher } from '../../batcher.ts';
import type { Clock } from '../../clock.ts';
import type { PageRequest } from '../../http/pagination.ts';
import { problems } from '../../http/problem.ts';
import type { CommandOutcome, SettledCommand, Signals } from '../../signals.ts';
import type { Database, Storage } from '../../storage/index.ts';
import type { SessionRow } from '../sessions/index.ts';
import type { CommandDelivery } from './delivery.ts';
import type { CommandRow } from './store.ts';
import * as store from './store.ts';

export type CommandStatus = 'queued' | 'delivered' | 'acknowledged' | 'failed' | 'expired';

export interface IssueCommand {
  name: string;
  data: unknown;
  ttlSeconds: number;
  idempotencyKey: string | null;
  /** Digest of the request, so a reused Idempotency-Key with another request is refused. */
  requestHash: string | null;
}

/**
 * Runs in the command's transaction before its row is written (the streams module moves its state
 * machine here, so both happen or neither); may refuse with a problem, or add fields to the data.
 */
export type IssueHook = (
  trx: Kysely<Database>,
  session: SessionRow,
  command: { commandId: string; data: unknown },
) => Promise<Record<string, unknown> | undefined>;

type Ack = store.Settlement;

interface PendingInsert {
  row: CommandRow;
  session: SessionRow;
  hook: IssueHook | undefined;
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

  constructor(
    private readonly storage: Storage,
    private readonly clock: Clock,
    private readonly delivery: CommandDelivery,
    private readonly signals: Signals,
  ) {
    // New commands and acks share one queue and one transaction per group (one commit, not two).
    // One writer keeps a session's commands committed, and so delivered, in the order they were accepted.
    this.log = new Batcher(
      (writes) => storage.db.transaction().execute((trx) => this.writeLog(trx, writes)),
      {
        retryAlone: true,
      },
    );
  }

  /** Runs `hook` in the transaction of every command named `name` (the stream and record commands). */
  onIssue(name: string, hook: IssueHook) {
    this.hooks.set(name, hook);
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
      },
    };
    let row: CommandRow;
    try {
      row = (await this.log.submit({ insert: pending })) as CommandRow;
    } catch (err) {
      // A concurrent retry with the same key may have won the race: answer with its command.
      const raced = await this.replayed(session, input);
      if (raced) return raced;
      throw err;
    }
    const deliveredAt = await this.delivery.deliver(session.session_id, {
      commandId: row.command_id,
      name: row.name,
      data: JSON.parse(row.data) as unknown,
      issuedAt: row.issued_at,
    });
    // The answer tells how far delivery got (CONTRACT §3), even when a quick device has acked already.
    const view = this.view(row);
    return deliveredAt === null ? view : { ...view, status: 'delivered' as const, deliveredAt };
  }

  /** One group of the log: its new commands, then its acks; each write's row, in order. */
  private async writeLog(trx: Kysely<Database>, writes: LogWrite[]): Promise<(CommandRow | undefined)[]> {
    const out: (CommandRow | undefined)[] = new Array(writes.length);
    const inserts: number[] = [];
    const acks: number[] = [];
    writes.forEach((w, i) => {
      ('insert' in w ? inserts : acks).push(i);
    });
    if (inserts.length > 0) {
      const rows = await this.insertAll(
        trx,
        inserts.map((i) => (writes[i] as { insert: PendingInsert }).insert),
      );
      inserts.forEach((i, n) => {
        out[i] = rows[n];
      });
    }
    if (acks.length > 0) {
      const rows = await store.settleCommands(
        trx,
        this.storage.dialect,
        acks.map((i) => (writes[i] as { ack: Ack }).ack),
        this.clock.now(),
      );
      acks.forEach((i, n) => {
        out[i] = rows[n];
      });
    }
    return out;
  }

  /** The hooks run in order (a stream's compare-and-set), then every row goes in by a few statements. */
  private async insertAll(trx: Kysely<Database>, items: PendingInsert[]) {
    const rows: CommandRow[] = [];
    for (const { row, session, hook } of items) {
      const extra = hook
        ? await hook(trx, session, { commandId: row.command_id, data: JSON.parse(row.data) })
        : undefined;
      rows.push(
        extra ? { ...row, data: JSON.stringify({ ...(JSON.parse(row.data) as object), ...extra }) } : row,
      );
    }
    await store.insertCommands(trx, this.storage.dialect, rows);
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
    return this.view(existing);
  }

  async find(sessionId: string, commandId: string) {
    const row = await store.findCommand(this.storage.db, sessionId, commandId);
    return row ? this.view(row) : null;
  }

  async list(sessionId: string, page: PageRequest) {
    const { rows, totalCount } = await store.listCommands(this.storage.db, sessionId, page);
    return { commands: rows.map((r) => this.view(r)), totalCount };
  }

  /** Records the device's answer to a command and tells the modules that wait on it. */
  async acknowledge(sessionId: string, commandId: string, ok: boolean, error: unknown): Promise<AckResult> {
    const row = await this.log.submit({
      ack: {
        sessionId,
        commandId,
        status: ok ? 'acknowledged' : 'failed',
        error: ok ? null : JSON.stringify(error ?? 'failed'),
      },
    });
    if (row) this.delivery.settled(commandId);
    if (!row) {
      const existing = await store.findCommand(this.storage.db, sessionId, commandId);
      if (!existing) return 'unknown';
      return existing.status === 'queued' || existing.status === 'delivered' || existing.status === 'expired'
        ? 'expired'
        : 'already_settled';
    }
    await this.signals.emit('command.settled', settled(row, ok ? 'acknowledged' : 'failed'));
    return 'settled';
  }

  /** Expires open commands past their time and reports each; returns how many. */
  async sweepExpired(): Promise<number> {
    const expired = await store.expireCommands(this.storage.db, this.clock.now());
    for (const row of expired) await this.signals.emit('command.settled', settled(row, 'expired'));
    return expired.length;
  }

  /** The command as the API shows it. An open command past its expiry is shown expired at once. */
  view(row: CommandRow) {
    // Written to the socket here, its delivery time still being committed.
    const writtenAt = row.status === 'queued' ? this.delivery.writtenAt(row.command_id) : undefined;
    if (writtenAt !== undefined) row = { ...row, status: 'delivered', delivered_at: writtenAt };
    const open = row.status === 'queued' || row.status === 'delivered';
    const status = (open && row.expires_at <= this.clock.now() ? 'expired' : row.status) as CommandStatus;
    return {
      commandId: row.command_id,
      sessionId: row.session_id,
      name: row.name,
      data: JSON.parse(row.data) as unknown,
      status,
      issuedAt: row.issued_at,
      expiresAt: row.expires_at,
      deliveredAt: row.delivered_at,
      settledAt: row.settled_at ?? (status === 'expired' ? row.expires_at : null),
      error: row.error === null ? null : (JSON.parse(row.error) as unknown),
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
